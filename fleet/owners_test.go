package fleet

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute"
	"github.com/tpsroute/tpsroute/internal/redistest"
	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/route"
)

// respUpstreams are Responses API providers on loopback: provider p answers
// every call with the response "resp_<p>", and counts the calls it got and
// the previous_response_id each named.
type respUpstreams struct {
	mu    sync.Mutex
	calls map[string][]string // provider -> previous_response_id of each call
	deps  []route.Deployment
}

const respStream = "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_P\",\"object\":\"response\",\"status\":\"in_progress\",\"model\":\"m\",\"output\":[]}}\n\n" +
	"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":1,\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"delta\":\"Hello\"}\n\n" +
	"event: response.completed\ndata: {\"type\":\"response.completed\",\"sequence_number\":2,\"response\":{\"id\":\"resp_P\",\"object\":\"response\",\"status\":\"completed\",\"model\":\"m\",\"output\":[{\"id\":\"msg_1\",\"type\":\"message\",\"status\":\"completed\",\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\",\"annotations\":[],\"text\":\"Hello\"}]}],\"usage\":{\"input_tokens\":5,\"input_tokens_details\":{\"cached_tokens\":0},\"output_tokens\":1,\"output_tokens_details\":{\"reasoning_tokens\":0},\"total_tokens\":6}}}\n\n"

func newRespUpstreams(t *testing.T, providers ...string) *respUpstreams {
	t.Helper()
	u := &respUpstreams{calls: map[string][]string{}}
	for _, p := range providers {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			var v struct {
				Prev string `json:"previous_response_id"`
			}
			_ = json.Unmarshal(b, &v)
			u.mu.Lock()
			u.calls[p] = append(u.calls[p], v.Prev)
			u.mu.Unlock()
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, strings.ReplaceAll(respStream, "resp_P", "resp_"+p))
		}))
		t.Cleanup(srv.Close)
		u.deps = append(u.deps, route.Deployment{Provider: p, Model: "m", BaseURL: srv.URL + "/v1", APIs: []route.API{route.APIResponses}})
	}
	return u
}

// prevs returns the previous_response_id of each call provider p got.
func (u *respUpstreams) prevs(p string) []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.calls[p]...)
}

// respReplica is one Client of a fleet, its rounds driven by the test.
type respReplica struct {
	f    *Fleet
	c    *tpsroute.Client
	logs *syncBuffer
}

func newRespReplica(t *testing.T, o Options, u *respUpstreams) *respReplica {
	t.Helper()
	r := &respReplica{logs: &syncBuffer{}}
	o.Logger = slog.New(slog.NewTextHandler(r.logs, nil))
	f, err := New(o)
	require.NoError(t, err)
	f.manual = true
	t.Cleanup(func() { require.NoError(t, f.Close()) })
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	c, err := tpsroute.New(tpsroute.Config{Deployments: u.deps, Fleet: f, HTTPClient: &http.Client{Transport: tr},
		Logger: o.Logger, Route: route.Options{Seed: 1}})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close()) })
	r.f, r.c = f, c
	return r
}

func (r *respReplica) round() { r.f.syncAt(context.Background(), time.Now(), true) }

// call makes one Responses call naming prev (if not empty) and returns the
// id of the response.
func (r *respReplica) call(t *testing.T, prev string, opts ...tpsroute.CallOption) (string, error) {
	t.Helper()
	body := `{"model":"m","input":"hi"}`
	if prev != "" {
		body = `{"model":"m","input":"more","previous_response_id":"` + prev + `"}`
	}
	resp, err := r.c.DoAPI(context.Background(), route.APIResponses, []byte(body), opts...)
	if err != nil {
		return "", err
	}
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, resp.Body.Close())
	require.NoError(t, err)
	var v struct{ ID string }
	require.NoError(t, json.Unmarshal(b, &v))
	return v.ID, nil
}

// TestResponseOwnerSharedRealRedis: a response created through replica A
// and followed up through replica B goes to the deployment that created
// it, for each of three deployments, against a real redis-server, and so
// does a conversation; the key
// expires after Options.ResponseTTL, holds no URL or credential, and an id
// no replica knows still goes to one deployment.
func TestResponseOwnerSharedRealRedis(t *testing.T) {
	addr := redistest.Addr(t)
	name := uniqueName(t)
	u := newRespUpstreams(t, "a", "b", "c")
	a := newRespReplica(t, Options{URL: "redis://" + addr + "/0", Name: name, Replica: "A"}, u)
	b := newRespReplica(t, Options{URL: "redis://" + addr + "/0", Name: name, Replica: "B"}, u)
	for _, p := range []string{"a", "b", "c"} {
		id, err := a.call(t, "", tpsroute.WithPin(p, ""))
		require.NoError(t, err)
		require.Equal(t, "resp_"+p, id)
	}
	conv := func(r *respReplica, opts ...tpsroute.CallOption) {
		resp, err := r.c.DoAPI(context.Background(), route.APIResponses, []byte(`{"model":"m","input":"hi","conversation":"conv_1"}`), opts...)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		require.NoError(t, resp.Body.Close())
	}
	conv(a, tpsroute.WithPin("b", ""))
	a.round()
	b.round()
	conv(b)
	assert.Len(t, u.prevs("b"), 3, "resp_b, then conv_1 through A and through B: B sends conv_1 to b, which holds it")
	for range 2 {
		for _, p := range []string{"c", "a", "b"} {
			id, err := b.call(t, "resp_"+p)
			require.NoError(t, err)
			assert.Equal(t, "resp_"+p, id, "B sends resp_%s to the deployment that holds it", p)
		}
	}
	for _, p := range []string{"a", "b", "c"} {
		want := []string{"", "resp_" + p, "resp_" + p}
		if p == "b" {
			want = []string{"", "", "", "resp_b", "resp_b"} // and conv_1's two calls
		}
		assert.Equal(t, want, u.prevs(p), "deployment %s", p)
	}

	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	key := a.f.ownerKey("resp_b")
	ttl, err := rdb.PTTL(context.Background(), key).Result()
	require.NoError(t, err)
	assert.InDelta(t, defaultResponseTTL.Hours(), ttl.Hours(), 1)
	v, err := rdb.Get(context.Background(), key).Bytes()
	require.NoError(t, err)
	assert.NotContains(t, string(v), "127.0.0.1", "a key names its deployment, never its URL")
	k, err := decodeKey(v)
	require.NoError(t, err)
	assert.Equal(t, measure.Key{Provider: "b", Model: "m", API: "responses"}, k)
	for _, id := range []string{"resp_a", "resp_b", "resp_c", "conv_1"} {
		require.NoError(t, rdb.Del(context.Background(), a.f.ownerKey(id)).Err())
	}

	before := len(u.prevs("a")) + len(u.prevs("b")) + len(u.prevs("c"))
	_, err = b.call(t, "resp_nobody")
	require.NoError(t, err)
	assert.Equal(t, before+1, len(u.prevs("a"))+len(u.prevs("b"))+len(u.prevs("c")), "an unknown id: one deployment")
}

// TestResponseOwnerBadData: an owner read from Redis that names a
// deployment this Client does not have, one of another API, or a value
// that does not decode is ignored with a log line, and the call is routed
// as for an unknown id: one deployment, never a *StateError.
func TestResponseOwnerBadData(t *testing.T) {
	mr := miniredis.RunT(t)
	u := newRespUpstreams(t, "a", "b")
	r := newRespReplica(t, Options{URL: "redis://" + mr.Addr(), Name: "test", Replica: "B"}, u)
	r.round()
	require.True(t, r.f.connected.Load())
	for _, tc := range []struct {
		name, id string
		value    []byte
		log      string
	}{
		{"unconfigured deployment", "resp_ghost", encodeKey(nil, measure.Key{Provider: "ghost", Model: "m", API: "responses"}), "does not have"},
		{"another region", "resp_region", encodeKey(nil, measure.Key{Provider: "a", Region: "eu", Model: "m", API: "responses"}), "does not have"},
		{"chat key", "resp_chat", encodeKey(nil, measure.Key{Provider: "a", Model: "m"}), "does not have"},
		{"truncated", "resp_trunc", []byte{5, 'a'}, "key=tpsroute:v1:test:resp:resp_trunc err=\"truncated at field 0\""},
		{"trailing bytes", "resp_trail", append(encodeKey(nil, measure.Key{Provider: "a", API: "responses"}), 'x'), "1 bytes after the key"},
		// A valid key followed by megabytes: only maxOwnerValue+1 bytes are
		// read, and the value is refused for its length, not decoded.
		{"huge", "resp_huge", append(encodeKey(nil, measure.Key{Provider: "a", Model: "m", API: "responses"}), make([]byte, 8<<20)...), "value longer than 4096 bytes"},
		// An empty value is what GETRANGE answers for a missing key: absent,
		// not a value to warn about.
		{"empty", "resp_empty", nil, "-"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, mr.Set(r.f.ownerKey(tc.id), string(tc.value)))
			_, err := r.call(t, tc.id)
			require.NoError(t, err, "routed as unknown, to one deployment")
			assert.Equal(t, 1, len(slicesWith(u.prevs("a"), tc.id))+len(slicesWith(u.prevs("b"), tc.id)))
			if tc.log == "-" {
				assert.NotContains(t, r.logs.String(), tc.id, "no log line")
			} else {
				assert.Contains(t, r.logs.String(), tc.log)
			}
		})
	}
}

func slicesWith(s []string, v string) []string {
	var out []string
	for _, x := range s {
		if x == v {
			out = append(out, x)
		}
	}
	return out
}

// TestOwnedBounded: ids over 256 bytes, and keys over 4 KiB encoded, are
// not written; a round writes at
// most maxOwnedPerRound ids, the rest at the next; ids kept while Redis is
// down are written when it is back; pending ids are capped.
func TestOwnedBounded(t *testing.T) {
	mr := miniredis.RunT(t)
	r := newReplica(t, "redis://"+mr.Addr(), "r1")
	k := fast.ForAPI(route.APIResponses).Key()
	r.f.Owned(strings.Repeat("r", maxIDBytes+1), k)
	r.f.Owned(strings.Repeat("r", maxIDBytes), k)
	r.f.Owned("", k)
	for i := range maxOwnedPerRound + 10 {
		r.f.Owned("resp_"+strings.Repeat("x", i%50)+string(rune('a'+i%26))+time.Duration(i).String(), k)
	}
	owned := func() int {
		n := 0
		for _, key := range mr.Keys() {
			if strings.HasPrefix(key, r.f.prefix+"resp:") {
				n++
			}
		}
		return n
	}
	r.round(t0)
	assert.Equal(t, maxOwnedPerRound, owned(), "one round's cap")
	r.round(t0)
	assert.Equal(t, maxOwnedPerRound+11, owned(), "the rest at the next round")
	assert.False(t, mr.Exists(r.f.ownerKey(strings.Repeat("r", maxIDBytes+1))))
	assert.Equal(t, defaultResponseTTL, mr.TTL(r.f.ownerKey(strings.Repeat("r", maxIDBytes))))
	got, ok := r.f.Owner(context.Background(), strings.Repeat("r", maxIDBytes))
	assert.True(t, ok, "an id of 256 bytes is looked up")
	assert.Equal(t, k, got)
	require.NoError(t, mr.Set(r.f.ownerKey(strings.Repeat("r", maxIDBytes+1)), string(encodeKey(nil, k))))
	_, ok = r.f.Owner(context.Background(), strings.Repeat("r", maxIDBytes+1))
	assert.False(t, ok, "one of 257 bytes is not")

	// A key of 4,096 encoded bytes is shared and read back whole; one byte
	// more is not shared.
	atCap := measure.Key{Provider: "p", Model: strings.Repeat("m", maxOwnerValue-15), API: "responses"}
	require.Equal(t, maxOwnerValue, len(encodeKey(nil, atCap)))
	overCap := atCap
	overCap.Model += "m"
	r.f.Owned("resp_at_cap", atCap)
	r.f.Owned("resp_over_cap", overCap)
	r.round(t0)
	got, ok = r.f.Owner(context.Background(), "resp_at_cap")
	assert.True(t, ok)
	assert.Equal(t, atCap, got)
	assert.False(t, mr.Exists(r.f.ownerKey("resp_over_cap")))

	addr := mr.Addr()
	mr.Close()
	r.f.Owned("resp_while_down", k)
	r.round(t0)
	r.f.mu.Lock()
	assert.Len(t, r.f.owned, 1, "kept for the next round")
	r.f.mu.Unlock()
	mr2 := miniredis.NewMiniRedis()
	require.NoError(t, mr2.StartAddr(addr))
	defer mr2.Close()
	r.round(t0)
	assert.True(t, mr2.Exists(r.f.ownerKey("resp_while_down")))

	for i := range maxPendingOwned + 5 {
		r.f.Owned("resp_"+time.Duration(i).String(), k)
	}
	r.f.mu.Lock()
	assert.Len(t, r.f.owned, maxPendingOwned)
	r.f.mu.Unlock()
}

// TestOwnerRedisDownDoesNotBlock: a Redis that accepts connections and never
// answers, with a Timeout of an hour, costs a stateful call nothing before
// the fleet has connected (Owner answers at once) and at most Owner's 50 ms
// bound once it believes Redis reachable; the call goes to one deployment.
func TestOwnerRedisDownDoesNotBlock(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var conns sync.WaitGroup
	done := make(chan struct{})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			go func() { // never answers; closed at the end of the test
				defer conns.Done()
				<-done
				_ = c.Close()
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		close(done)
		conns.Wait()
	})
	u := newRespUpstreams(t, "a", "b")
	r := newRespReplica(t, Options{URL: "redis://" + ln.Addr().String(), Replica: "B", Timeout: time.Hour}, u)

	_, err = r.call(t, "resp_elsewhere")
	require.NoError(t, err, "not connected: no wait")
	r.f.connected.Store(true) // as if the last round had reached Redis
	_, err = r.call(t, "resp_elsewhere")
	require.NoError(t, err, "Owner gave up after its bound")
	assert.Equal(t, 2, len(u.prevs("a"))+len(u.prevs("b")))
}

// TestDecodeKey: a value decodes only when it holds exactly the four
// length-prefixed fields encodeKey writes, with a provider.
func TestDecodeKey(t *testing.T) {
	k := measure.Key{Provider: "p", Region: "r", Model: "m", API: "responses"}
	got, err := decodeKey(encodeKey(nil, k))
	require.NoError(t, err)
	assert.Equal(t, k, got)
	for name, tt := range map[string]struct {
		b   []byte
		err string
	}{
		"empty":               {nil, "truncated at field 0"},
		"a length past it":    {[]byte{3, 'a', 'b'}, "truncated at field 0"},
		"three fields":        {encodeKey(nil, k)[:len(encodeKey(nil, k))-len("responses")-1], "truncated at field 3"},
		"bytes after the key": {append(encodeKey(nil, k), 'x'), "1 bytes after the key"},
		"no provider":         {encodeKey(nil, measure.Key{Model: "m"}), "no provider"},
	} {
		_, err := decodeKey(tt.b)
		assert.EqualError(t, err, tt.err, name)
	}
	// A length one past the bytes left, whose missing byte lies within the
	// slice's capacity: never read.
	b := append(make([]byte, 0, 8), 3, 'a', 'b', 'c')[:3]
	_, err = decodeKey(b)
	assert.EqualError(t, err, "truncated at field 0")
}

// FuzzDecodeKey: a value from Redis never panics the decoder, and whatever
// it accepts is a key with a provider that encodes back to the same bytes.
func FuzzDecodeKey(f *testing.F) {
	f.Add(encodeKey(nil, measure.Key{Provider: "p", Region: "r", Model: "m", API: "responses"}))
	f.Add([]byte{})
	f.Add([]byte{3, 'a', 'b'})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		k, err := decodeKey(b)
		if err != nil {
			return
		}
		if k.Provider == "" {
			t.Fatalf("accepted a key without a provider: %q", b)
		}
		if got := encodeKey(nil, k); string(got) != string(b) {
			t.Fatalf("decoded %q from %q, which encodes to %q", k, b, got)
		}
	})
}
