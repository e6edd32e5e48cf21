package executor_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/tpsroute/tpsroute/fallback"
	"github.com/tpsroute/tpsroute/internal/executor"
	"github.com/tpsroute/tpsroute/replay"
	"github.com/tpsroute/tpsroute/route"
	"github.com/tpsroute/tpsroute/tps"
)

// msgBody is a streaming Messages request.
const msgBody = `{"model":"m","stream":true,"max_tokens":256,"messages":[{"role":"user","content":"hi"}]}`

// msgProf is prof in replay's Messages style.
func msgProf(tokens int) *replay.Profile {
	p := prof(tokens)
	p.Style = replay.Messages
	return p
}

// msgCall is a streaming Messages call, posted to the deployment's
// messages path with its wire model.
func msgCall() executor.Call {
	build := func(ctx context.Context, d route.Deployment, body []byte) (*http.Request, error) {
		b, err := sjson.SetBytes(body, "model", d.WireModel())
		if err != nil {
			return nil, err
		}
		return apiBuild("messages")(ctx, d, b)
	}
	return executor.Call{Body: []byte(msgBody), Stream: true, Protocol: tps.ProtocolMessages, Build: build}
}

// msgRead is what a caller read of a Messages stream, checked event by
// event against the API's grammar.
type msgRead struct {
	text     string   // the text deltas, concatenated
	starts   int      // message_start events
	blocks   []string // the content_block_start types, by index
	stopped  bool     // message_stop came last
	usage    int64    // message_delta's usage.output_tokens
	problems []string // violations of the event order
	err      error    // the read error, nil on a clean end
}

// readMessages reads body whole and checks that it is one well-formed
// Messages stream: one message_start first, blocks started in index order
// each before its deltas and stopped before the next, message_delta after
// the last block, message_stop last (a stream cut short only by err).
func readMessages(t testing.TB, body io.ReadCloser) msgRead {
	t.Helper()
	raw, err := io.ReadAll(body)
	require.NoError(t, body.Close())
	r := msgRead{err: err}
	open := -1
	bad := func(f string, a ...any) { r.problems = append(r.problems, fmt.Sprintf(f, a...)) }
	for _, ev := range strings.Split(string(raw), "\n\n") {
		if ev == "" {
			continue
		}
		var name, data string
		for _, l := range strings.Split(ev, "\n") {
			if v, ok := strings.CutPrefix(l, "event: "); ok {
				name = v
			} else if v, ok := strings.CutPrefix(l, "data: "); ok {
				data = v
			}
		}
		typ := gjson.Get(data, "type").String()
		if name != "" && name != typ {
			bad("event %q carries type %q", name, typ)
		}
		if r.stopped {
			bad("%s after message_stop", typ)
		}
		if r.starts == 0 && typ != "message_start" && typ != "error" {
			bad("%s before message_start", typ)
		}
		idx := int(gjson.Get(data, "index").Int())
		switch typ {
		case "message_start":
			r.starts++
			if r.starts > 1 {
				bad("a second message_start")
			}
		case "content_block_start":
			if open >= 0 {
				bad("block %d starts while %d is open", idx, open)
			}
			if idx != len(r.blocks) {
				bad("block %d starts after %d blocks", idx, len(r.blocks))
			}
			r.blocks = append(r.blocks, gjson.Get(data, "content_block.type").String())
			open = idx
		case "content_block_delta":
			if idx != open {
				bad("a delta of block %d while %d is open", idx, open)
			}
			if gjson.Get(data, "delta.type").String() == "text_delta" {
				r.text += gjson.Get(data, "delta.text").String()
			}
		case "content_block_stop":
			if idx != open {
				bad("block %d stops while %d is open", idx, open)
			}
			open = -1
		case "message_delta":
			if open >= 0 {
				bad("message_delta while block %d is open", open)
			}
			r.usage = gjson.Get(data, "usage.output_tokens").Int()
		case "message_stop":
			r.stopped = true
		case "ping":
		default:
			bad("unexpected event %q", typ)
		}
	}
	if err == nil && !r.stopped {
		bad("a clean end without message_stop")
	}
	return r
}

// msgEnv is a replay fleet whose requests are recorded by host.
func msgEnv(scripts map[string]replay.Script, opts fallback.Options) (env, *recorder) {
	h := replay.NewHandler(scripts)
	rec := &recorder{next: h.Transport()}
	return env{h: h, ex: executor.New(opts, executor.Hooks{Transport: rec}), start: time.Now()}, rec
}

// prefillOf returns the final message of the last request host was sent.
func prefillOf(t testing.TB, rec *recorder, host string) gjson.Result {
	t.Helper()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	seen := rec.seen[host]
	require.NotEmpty(t, seen, host)
	last := seen[len(seen)-1]
	body := last[strings.Index(last, "{"):]
	return gjson.Get(body, "messages.@reverse.0")
}

// TestMessagesContinuation is issue 30 item 5: a Messages stream cut after
// its first output continues on a deployment that declares assistant
// prefill, with the exact delivered text as a final assistant message (its
// trailing whitespace left out: Anthropic refuses it), and the caller reads
// one well-formed Messages stream whose text is the whole answer.
func TestMessagesContinuation(t *testing.T) {
	const n = 40
	for _, tt := range []struct {
		name string
		cut  replay.Fault
		opts fallback.Options
	}{
		{"cut_after_10", replay.CutAfter(10), fallback.Options{}},
		{"cut_after_4", replay.CutAfter(4), fallback.Options{}},
		{"overloaded_after_7", replay.ErrorEventAt(7, replay.Messages), fallback.Options{MidStream: fallback.MidStreamContinue}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e, rec := msgEnv(map[string]replay.Script{
					"a-m": replay.WithFaults(msgProf(n), tt.cut),
					"b-m": msgProf(n),
				}, tt.opts)
				res, err := e.do(t, planOf(prefillDep("a", "a-m"), prefillDep("b", "b-m")), msgCall())
				require.NoError(t, err)
				r := readMessages(t, res.Body)
				require.NoError(t, r.err)
				assert.Empty(t, r.problems)
				assert.Equal(t, replay.Text(n), r.text)
				assert.Equal(t, 1, r.starts)
				assert.Equal(t, []string{"text"}, r.blocks, "the continued block is one block")
				assert.Equal(t, "b", res.Deployment().Provider)
				last := prefillOf(t, rec, "b.test")
				assert.Equal(t, "assistant", last.Get("role").String())
				delivered := last.Get("content").String()
				assert.True(t, strings.HasPrefix(replay.Text(n), delivered+" "), "the delivered text, %q", delivered)
				assert.False(t, strings.HasSuffix(delivered, " "), "no trailing whitespace")
				assert.False(t, last.Get("prefix").Exists(), "Messages refuses unknown fields")
				s := res.Sample()
				assert.Equal(t, r.usage, s.OutputTokens, "the Sample is the continuation's, as message_delta's count")
				assert.Positive(t, s.TTFT)
			})
		})
	}
}

// TestMessagesPrefillRejectionRemembered: a Messages deployment that answers
// the prefill with a 400 naming the assistant message is not offered a
// continuation again, and the caller gets the original mid-stream error.
func TestMessagesPrefillRejectionRemembered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, _ := msgEnv(map[string]replay.Script{
			"a-m": replay.WithFaults(msgProf(40), replay.CutAfter(10)),
			"b-m": replay.WithFaults(msgProf(40), replay.RejectPrefill()),
		}, fallback.Options{})
		plan := planOf(dep("a", "a-m"), prefillDep("b", "b-m"))
		for call := range 3 {
			res, err := e.do(t, plan, msgCall())
			require.NoError(t, err)
			r := readMessages(t, res.Body)
			require.ErrorIs(t, r.err, fallback.ErrMidStream, "call %d", call)
			assert.Empty(t, r.problems)
			var fe *fallback.Error
			require.ErrorAs(t, r.err, &fe)
			assert.Equal(t, fallback.ContinuationRejected, fe.Continuation())
		}
		assert.Len(t, attemptsFor(e.h, "b-m"), 1, "one rejected prefill, then never offered again")
	})
}

// Messages events for the splice tests, framed as Anthropic frames them.
func msgText(i int, s string) string {
	return fmt.Sprintf("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":%d,\"delta\":{\"type\":\"text_delta\",\"text\":%q}}\n\n", i, s)
}

func msgBlockStart(i int, typ string) string {
	extra := `"text":""`
	if typ == "tool_use" {
		extra = `"id":"toolu_1","name":"get_weather","input":{}`
	}
	return fmt.Sprintf("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":%d,\"content_block\":{\"type\":%q,%s}}\n\n", i, typ, extra)
}

func msgBlockStop(i int) string {
	return fmt.Sprintf("event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":%d}\n\n", i)
}

// TestMessagesSplice: the caller reads the cut stream, then the
// continuation's events without its message_start and, when the cut block
// was still open, without its first content_block_start; later blocks are
// renumbered after the caller's; the whitespace the prefill left out is
// dropped from the continuation's first text as far as it repeats it
// (docs/STREAM_QUIRKS.md Q37).
func TestMessagesSplice(t *testing.T) {
	cont := func(blocks ...string) string { // a continuation answer
		return msgStart + msgPing + strings.Join(blocks, "") + msgEnd
	}
	tests := []struct {
		name    string
		primary string // what the caller reads before the cut
		answer  string // the continuation's stream
		prefill string // the continuation's final assistant content
		want    string // what the caller reads after the cut
		text    string
	}{
		{name: "whitespace repeated",
			primary: msgStart + msgBlockStart(0, "text") + msgText(0, "Hello\n\n"),
			answer:  cont(msgBlockStart(0, "text"), msgText(0, "\n\nWorld"), msgBlockStop(0)),
			prefill: "Hello",
			want:    msgPing + msgText(0, "World") + msgBlockStop(0) + msgEnd,
			text:    "Hello\n\nWorld"},
		{name: "whitespace repeated over two deltas",
			primary: msgStart + msgBlockStart(0, "text") + msgText(0, "Hello\n\n"),
			answer:  cont(msgBlockStart(0, "text"), msgText(0, "\n"), msgText(0, "\nWorld"), msgBlockStop(0)),
			prefill: "Hello",
			want:    msgPing + msgText(0, "World") + msgBlockStop(0) + msgEnd,
			text:    "Hello\n\nWorld"},
		{name: "whitespace partly repeated",
			primary: msgStart + msgBlockStart(0, "text") + msgText(0, "Hello\n\n"),
			answer:  cont(msgBlockStart(0, "text"), msgText(0, "\nWorld"), msgBlockStop(0)),
			prefill: "Hello",
			want:    msgPing + msgText(0, "World") + msgBlockStop(0) + msgEnd,
			text:    "Hello\n\nWorld"},
		{name: "whitespace not repeated",
			primary: msgStart + msgBlockStart(0, "text") + msgText(0, "Hello ") + msgText(0, "there "),
			answer:  cont(msgBlockStart(0, "text"), msgText(0, "\nWorld"), msgBlockStop(0)),
			prefill: "Hello there",
			want:    msgPing + msgText(0, "\nWorld") + msgBlockStop(0) + msgEnd,
			text:    "Hello there \nWorld"},
		{name: "no trailing whitespace",
			primary: msgStart + msgBlockStart(0, "text") + msgText(0, "Hel"),
			answer:  cont(msgBlockStart(0, "text"), msgText(0, "lo"), msgBlockStop(0), msgBlockStart(1, "text"), msgText(1, "!"), msgBlockStop(1)),
			prefill: "Hel",
			want:    msgPing + msgText(0, "lo") + msgBlockStop(0) + msgBlockStart(1, "text") + msgText(1, "!") + msgBlockStop(1) + msgEnd,
			text:    "Hello!"},
		{name: "cut after a closed block",
			primary: msgStart + msgBlockStart(0, "text") + msgText(0, "Hello") + msgBlockStop(0),
			answer:  cont(msgBlockStart(0, "text"), msgText(0, " World"), msgBlockStop(0)),
			prefill: "Hello",
			want:    msgPing + msgBlockStart(1, "text") + msgText(1, " World") + msgBlockStop(1) + msgEnd,
			text:    "Hello World"},
		{name: "second text block open",
			primary: msgStart + msgBlockStart(0, "text") + msgText(0, "Hello") + msgBlockStop(0) + msgBlockStart(1, "text") + msgText(1, " Wor"),
			answer:  cont(msgBlockStart(0, "text"), msgText(0, "ld"), msgBlockStop(0)),
			prefill: "Hello Wor",
			want:    msgPing + msgText(1, "ld") + msgBlockStop(1) + msgEnd,
			text:    "Hello World"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gate := make(chan struct{})
			srv := protocolServer(t, gate, map[string]struct {
				status int
				body   string
			}{"a": {200, tt.primary + "|"}, "b": {200, tt.answer}})
			var seen []string
			rec := &recorder{next: srv.Client().Transport}
			a, b := dep("a", "m"), prefillDep("b", "m")
			a.BaseURL, b.BaseURL = srv.URL+"/a/v1", srv.URL+"/b/v1"
			ex := executor.New(fallback.Options{}, executor.Hooks{Transport: rec})
			call := msgCall()
			call.Body = []byte(`{"model":"m","stream":true,"max_tokens":64,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"text","text":"Say:"}]}]}`)
			res, err := ex.Do(context.Background(), planOf(a, b), call)
			require.NoError(t, err)
			got := make([]byte, len(tt.primary))
			_, err = io.ReadFull(res.Body, got)
			require.NoError(t, err)
			close(gate)
			r := readMessages(t, struct {
				io.Reader
				io.Closer
			}{io.MultiReader(strings.NewReader(string(got)), res.Body), res.Body})
			require.NoError(t, r.err)
			assert.Empty(t, r.problems)
			assert.Equal(t, tt.text, r.text)
			assert.Equal(t, tt.primary, string(got))
			rec.mu.Lock()
			for _, s := range rec.seen {
				seen = append(seen, s...)
			}
			rec.mu.Unlock()
			require.Len(t, seen, 2)
			last := gjson.Get(seen[1][strings.Index(seen[1], "{"):], "messages.@reverse.0")
			assert.Equal(t, "assistant", last.Get("role").String())
			assert.Equal(t, "Say:"+tt.prefill, last.Get("content.0.text").String(), "the caller's own prefill, then the delivered text")
			assert.Equal(t, 2, len(gjson.Get(seen[1][strings.Index(seen[1], "{"):], "messages").Array()), "appended to the caller's final assistant message")
		})
	}
}

// TestMessagesContinuationUnsupported: a Messages stream that delivered a
// tool_use block is not continued (ContinuationUnsupported, named in the
// message), nor is a Responses stream, whose API has no assistant prefill.
func TestMessagesContinuationUnsupported(t *testing.T) {
	type answer = struct {
		status int
		body   string
	}
	tests := []struct {
		name    string
		proto   tps.Protocol
		path    string
		primary string
		msg     string
	}{
		{"messages tool_use", tps.ProtocolMessages, "messages",
			msgStart + msgBlockStart(0, "text") + msgText(0, "Hi ") + msgBlockStop(0) + msgBlockStart(1, "tool_use") +
				"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"city\\\": \\\"Paris\\\"}\"}}\n\n" + msgBlockStop(1),
			"the stream carried tool calls"},
		{"messages tool_use without input", tps.ProtocolMessages, "messages",
			msgStart + msgBlockStart(0, "text") + msgText(0, "Hi ") + msgBlockStop(0) + msgBlockStart(1, "tool_use") + msgBlockStop(1),
			"the stream carried a content block that is not text"},
		{"responses", tps.ProtocolResponses, "responses", respCreated + respDelta,
			"a Responses stream is not continued (the Responses API has no assistant prefill)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gate := make(chan struct{})
			srv := protocolServer(t, gate, map[string]answer{"a": {200, tt.primary + "|"}, "b": {200, msgStart + msgDelta + msgEnd}})
			a, b := dep("a", "m"), prefillDep("b", "m")
			a.BaseURL, b.BaseURL = srv.URL+"/a/v1", srv.URL+"/b/v1"
			ex := executor.New(fallback.Options{MidStream: fallback.MidStreamContinue}, executor.Hooks{Transport: srv.Client().Transport})
			res, err := ex.Do(context.Background(), planOf(a, b), executor.Call{
				Body: []byte(msgBody), Stream: true, Protocol: tt.proto, Build: apiBuild(tt.path),
			})
			require.NoError(t, err)
			got := make([]byte, len(tt.primary))
			_, err = io.ReadFull(res.Body, got)
			require.NoError(t, err)
			close(gate)
			_, err = io.ReadAll(res.Body)
			require.NoError(t, res.Body.Close())
			require.ErrorIs(t, err, fallback.ErrMidStream)
			var fe *fallback.Error
			require.ErrorAs(t, err, &fe)
			assert.Equal(t, fallback.ContinuationUnsupported, fe.Continuation())
			assert.Contains(t, err.Error(), tt.msg)
			assert.True(t, errors.Is(err, fallback.ErrContinuation))
			assert.Equal(t, 1, res.AttemptCount(), "no continuation was sent")
		})
	}
}

// TestMessagesPrefill: the Messages prefill appends the text as a final
// assistant message, or to the caller's own final assistant message (its
// string, or its last text block), and refuses a body it cannot read.
func TestMessagesPrefill(t *testing.T) {
	for _, tt := range []struct {
		name, body, text, want string
		err                    bool
	}{
		{"appended", `{"messages":[{"role":"user","content":"hi"}]}`, "Hello",
			`{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"Hello"}]}`, false},
		{"after the caller's string", `{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"{"}]}`, `"a":1`,
			`{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"{\"a\":1"}]}`, false},
		{"after the caller's text block", `{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"text","text":"A","cache_control":{"type":"ephemeral"}}]}]}`, "B",
			`{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"text","text":"AB","cache_control":{"type":"ephemeral"}}]}]}`, false},
		{"after another block", `{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"image","source":{}}]}]}`, "B",
			`{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"image","source":{}},{"type":"text","text":"B"}]}]}`, false},
		{"nothing to add", `{"messages":[{"role":"user","content":"hi"}]}`, "",
			`{"messages":[{"role":"user","content":"hi"}]}`, false},
		{"no messages", `{"model":"m"}`, "Hello", "", true},
		{"not JSON", `{"messages":`, "Hello", "", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := executor.MessagesPrefill([]byte(tt.body), tt.text)
			if tt.err {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.JSONEq(t, tt.want, string(got))
		})
	}
}

// TestMessagesRescue: the slow-stream rescue continues a Messages stream by
// the same prefill and splice: the caller reads one Messages stream with
// the whole answer, sooner than the slow stream would have ended.
func TestMessagesRescue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &replay.Profile{OutputTokens: 200, TPS: 100, TTFT: 200 * time.Millisecond, Style: replay.Messages}
		e, rec := msgEnv(map[string]replay.Script{"a-m": replay.WithFaults(p, replay.SlowAfter(20, 5)), "b-m": p}, fallback.Options{})
		start := time.Now()
		res, err := e.do(t, rescuePlan(100, 100), msgCall())
		require.NoError(t, err)
		r := readMessages(t, res.Body)
		require.NoError(t, r.err)
		assert.Empty(t, r.problems)
		assert.Equal(t, replay.Text(200), r.text)
		assert.Equal(t, 1, r.starts)
		assert.Equal(t, "b", res.Deployment().Provider, "rescued")
		assert.Less(t, time.Since(start), 10*time.Second)
		assert.False(t, strings.HasSuffix(prefillOf(t, rec, "b.test").Get("content").String(), " "))
	})
}

// TestMessagesSpliceAfterFailedTarget: a continuation target that fails
// before its first output (its message_start and block start already read)
// leaves the next target's splice as it was: the caller still reads one
// Messages stream.
func TestMessagesSpliceAfterFailedTarget(t *testing.T) {
	primary := msgStart + msgBlockStart(0, "text") + msgText(0, "Hello ")
	gate := make(chan struct{})
	srv := protocolServer(t, gate, map[string]struct {
		status int
		body   string
	}{
		"a": {200, primary + "|"},
		"b": {200, msgStart + msgBlockStart(0, "text") + msgOverloaded},
		"c": {200, msgStart + msgBlockStart(0, "text") + msgText(0, " World") + msgBlockStop(0) + msgEnd},
	})
	a, b, c := dep("a", "m"), prefillDep("b", "m"), prefillDep("c", "m")
	a.BaseURL, b.BaseURL, c.BaseURL = srv.URL+"/a/v1", srv.URL+"/b/v1", srv.URL+"/c/v1"
	ex := executor.New(fallback.Options{}, executor.Hooks{Transport: srv.Client().Transport})
	res, err := ex.Do(context.Background(), planOf(a, b, c), msgCall())
	require.NoError(t, err)
	got := make([]byte, len(primary))
	_, err = io.ReadFull(res.Body, got)
	require.NoError(t, err)
	close(gate)
	rest, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	require.NoError(t, res.Body.Close())
	assert.Equal(t, primary+msgText(0, "World")+msgBlockStop(0)+msgEnd, string(got)+string(rest))
	assert.Equal(t, "c", res.Deployment().Provider)
}
