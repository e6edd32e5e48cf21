package executor

import (
	"encoding/json"
	"math"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// sjsonWire is attemptWire as sjson alone writes it: the reference.
func sjsonWire(body []byte, wire string, usage bool) ([]byte, bool, error) {
	b, err := sjson.SetBytes(body, "model", wire)
	if err != nil {
		return nil, false, err
	}
	stream := gjson.GetBytes(b, "stream").Type == gjson.True
	if usage && stream && !gjson.GetBytes(b, "stream_options.include_usage").Bool() {
		b, err = sjson.SetBytes(b, "stream_options.include_usage", true)
	}
	return b, stream, err
}

// checkWire checks attemptWire against sjsonWire on body: the same JSON
// value, the same stream, and body left as it was.
func checkWire(t *testing.T, body []byte, wire string, usage bool) {
	t.Helper()
	orig := string(body)
	got, stream, err := attemptWire(body, wire, usage)
	want, wantStream, wantErr := sjsonWire([]byte(orig), wire, usage)
	assert.Equal(t, orig, string(body), "body is not modified")
	if wantErr != nil {
		return
	}
	require.NoError(t, err)
	assert.Equal(t, wantStream, stream)
	var g, w any
	require.NoError(t, json.Unmarshal(want, &w), "sjson's %s", want)
	require.NoError(t, json.Unmarshal(got, &g), "%s", got)
	assert.Equal(t, w, g, "%s against sjson's %s", got, want)
}

func TestAttemptWire(t *testing.T) {
	for name, body := range map[string]string{
		"plain":                 `{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
		"stream":                `{"model":"m","stream":true,"messages":[]}`,
		"stream, spaces":        "{ \"model\" : \"m\" , \"stream\" : true }  \n",
		"model last":            `{"stream":true,"model":"m"}`,
		"options without usage": `{"model":"m","stream":true,"stream_options":{"x":1}}`,
		"usage false":           `{"model":"m","stream":true,"stream_options":{"include_usage":false}}`,
		"usage true":            `{"model":"m","stream":true,"stream_options":{"include_usage":true}}`,
		"no model":              `{"stream":true,"messages":[]}`,
		"model not a string":    `{"model":7,"stream":true}`,
		"stream false":          `{"model":"m","stream":false}`,
		"model in a message":    `{"messages":[{"model":"x"}],"model":"m","stream":true}`,
		"escaped model":         `{"model":"a\"b","stream":true}`,
		"empty object":          `{}`,
		"duplicate keys":        `{"model":"a","stream":true,"model":"b","stream":false,"stream_options":{"x":1},"stream_options":{"y":2}}`,
	} {
		t.Run(name, func(t *testing.T) {
			for _, usage := range []bool{true, false} {
				checkWire(t, []byte(body), `wire "w" <&>`, usage)
			}
		})
	}
	got, _, err := attemptWire([]byte(`{"model":"m","stream":true}`), "w", true)
	require.NoError(t, err)
	assert.JSONEq(t, `{"model":"w","stream":true,"stream_options":{"include_usage":true}}`, string(got))
}

// TestAttemptWireOneCopy: the common bodies (a model, and no stream_options
// or one that already asks for usage) cost one copy of themselves, not
// sjson's copy per field.
func TestAttemptWireOneCopy(t *testing.T) {
	for _, opts := range []string{``, `"stream_options":{"include_usage":true},`} {
		body := []byte(`{"model":"m","stream":true,` + opts + `"messages":[{"role":"user","content":"` + strings.Repeat("a", 64<<10) + `"}]}`)
		// The least of three rounds: a goroutine of an earlier test that
		// allocates meanwhile cannot fail it.
		least := uint64(math.MaxUint64)
		for range 3 {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			for range 10 {
				_, _, err := attemptWire(body, "wire-model", true)
				require.NoError(t, err)
			}
			runtime.ReadMemStats(&after)
			least = min(least, after.TotalAlloc-before.TotalAlloc)
		}
		assert.Less(t, least, uint64(10*len(body)*3/2), "bytes allocated by 10 calls, options %q", opts)
	}
}

// FuzzAttemptWire checks attemptWire against sjson for any JSON object.
func FuzzAttemptWire(f *testing.F) {
	for _, s := range []string{`{"model":"m","stream":true}`, `{"stream":true,"model":"m","stream_options":{}}`, "{\"model\":\"m\" }\t", `{"model":null}`} {
		f.Add([]byte(s), "w", true)
	}
	f.Fuzz(func(t *testing.T, body []byte, wire string, usage bool) {
		var v map[string]any
		if json.Unmarshal(body, &v) != nil {
			return // the Client sends only bodies it checked are objects
		}
		checkWire(t, body, wire, usage)
	})
}

// BenchmarkAttemptWire builds an attempt's body from a streaming call with a
// 100 KiB system prompt.
func BenchmarkAttemptWire(b *testing.B) {
	body := []byte(`{"model":"m","stream":true,"messages":[{"role":"system","content":"` + strings.Repeat("a", 100<<10) + `"},{"role":"user","content":"hi"}]}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := attemptWire(body, "wire-model", true); err != nil {
			b.Fatal(err)
		}
	}
}
