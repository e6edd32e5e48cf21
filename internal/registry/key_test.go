package registry

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/measure"
)

// TestKeyAPI: keys of one deployment on two APIs are two keys, named apart,
// and a state file keeps them apart (a chat key is written as before keys
// had an API).
func TestKeyAPI(t *testing.T) {
	chat := measure.Key{Provider: "openai", Region: "us", Model: "gpt"}
	resp := measure.Key{Provider: "openai", Region: "us", Model: "gpt", API: "responses"}
	assert.Equal(t, "openai/us/gpt", chat.String())
	assert.Equal(t, "openai/us/gpt#responses", resp.String())
	assert.NotEqual(t, chat, resp)

	var b []byte
	appendKey(&b, chat)
	var old []byte
	for _, s := range []string{"openai", "us", "gpt"} {
		appendString(&old, s)
	}
	assert.Equal(t, old, b, "a chat key encodes as a key without an API did")

	now := time.Unix(1_700_000_000, 0)
	r := New(measure.Options{})
	for i, s := range samples(40, 3) {
		k := []measure.Key{chat, resp}[i%2]
		if k == resp {
			s.TPS *= 3
		}
		r.RecordAt(now.Add(time.Duration(i)*time.Second), k, s)
	}
	now = now.Add(time.Minute)
	got, _ := restore(t, save(t, r, now), now)
	for _, k := range []measure.Key{chat, resp} {
		want, ok := r.SnapshotAt(now).Lookup(k)
		require.True(t, ok, "%v", k)
		have, ok := got.SnapshotAt(now).Lookup(k)
		require.True(t, ok, "%v restored", k)
		assert.Equal(t, want, have, "%v", k)
	}
	a, _ := got.SnapshotAt(now).Lookup(chat)
	c, _ := got.SnapshotAt(now).Lookup(resp)
	assert.NotEqual(t, a.TPS, c.TPS, "each API keeps its own speed")
}
