package tpsroute

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/tidwall/gjson"

	"github.com/tpsroute/tpsroute/fallback"
	"github.com/tpsroute/tpsroute/internal/executor"
	"github.com/tpsroute/tpsroute/internal/payload"
	"github.com/tpsroute/tpsroute/internal/sse"
	"github.com/tpsroute/tpsroute/tps"
)

// NewStreaming starts a routed streaming chat completion, as openai-go's
// NewStreaming does. params.Model is the logical model, optionally
// "model@revision"; each attempt sends the chosen deployment's own model id,
// URL, key and headers. Usage (include_usage) is asked for unless the
// deployment declares NoStreamOptions. Failover happens before the first output chunk (the commit
// point); after it, a failure ends the stream with a *fallback.Error from Err,
// never a clean end. openai-go's own retries are off: the fallback rules own
// them.
//
// NewStreaming returns once the commit point is reached or the call failed;
// errors surface from the Stream's Err. The caller must Close the Stream or
// read it to the end. Cancelling ctx ends the upstream request at once.
func (s ChatCompletionService) NewStreaming(ctx context.Context, params openai.ChatCompletionNewParams, opts ...CallOption) *Stream {
	return s.c.newStream(ctx, params, opts, true)
}

// New creates a routed chat completion and returns it whole, as openai-go's
// New does. It streams underneath, so every call feeds the TPS statistics,
// and since nothing reaches the caller before the end, a failure at any
// point (even mid-stream) fails over invisibly to the next deployment. The
// answer is assembled from the chunks as they are timed (answer.Accumulator)
// and decoded once by openai-go, so RawJSON holds it whole. Use WithOutcome
// to learn which deployment answered, its tps.Sample (usage, timing) and the
// attempts.
func (s ChatCompletionService) New(ctx context.Context, params openai.ChatCompletionNewParams, opts ...CallOption) (*openai.ChatCompletion, error) {
	cc := buildCallConfig(opts)
	body, err := json.Marshal(params)
	var info requestInfo
	if err != nil {
		err = &RequestError{Reason: "encoding the request: " + err.Error()}
	} else {
		info, err = readRequest(body)
	}
	if err != nil {
		endCall(&cc, nil, err)
		return nil, err
	}
	info.Stream = false
	r, err := s.c.respond(ctx, body, info, nil, &cc)
	if err != nil {
		return nil, err
	}
	defer r.Body.Close()
	raw := make([]byte, r.res.ContentLength)
	if _, err := io.ReadFull(r.Body, raw); err != nil {
		return nil, fmt.Errorf("tpsroute: reading the assembled completion: %w", err)
	}
	var out openai.ChatCompletion
	// The executor built raw as valid JSON: openai-go's decoder alone, without
	// encoding/json's validating pass before it.
	if err := out.UnmarshalJSON(raw); err != nil {
		return nil, fmt.Errorf("tpsroute: decoding the assembled completion: %w", err)
	}
	return &out, nil
}

// Stream is a routed streaming chat completion, a pull iterator like
// openai-go's ssestream.Stream: call Next until it returns false, read each
// chunk with Current or Delta, then check Err. A Stream is for one
// goroutine, except Close, which may be called from another goroutine to
// abort the stream.
//
// Next only scans each chunk (as tps does to time it); Current decodes it into
// an openai.ChatCompletionChunk on first call, with openai-go's own decoder.
// Delta returns the scanned text, tool-call fragments, finish reason and usage
// without that decode, for a fraction of its CPU and no allocation.
type Stream struct {
	c      *Client
	st     *callState
	body   io.ReadCloser // the committed attempt's body; nil if none
	cancel context.CancelFunc

	sse     sse.EventReader // the one SSE framer's rules, as the Tap frames the same bytes
	chunk   payload.Chunk
	cur     *openai.ChatCompletionChunk // allocated by the first Current
	decoded bool                        // cur holds the current chunk
	delta   Delta
	deltaOK bool // delta holds the current chunk
	text    []byte
	tools   []ToolCallDelta
	ends    []int

	mu        sync.Mutex // guards err: Close may run on another goroutine
	err       error
	done      atomic.Bool // no more chunks: ended, failed or closed
	ended     atomic.Bool // the upstream stream ended (cleanly or not) before Close
	closeOnce sync.Once
}

// callState is one call of the Chat service: its options and its outcome.
type callState struct {
	cfg    callConfig
	stream bool
	res    *executor.Result
	err    error // a routing or pre-commit failure
}

// newStream runs one call of the Chat service on the core path, as Do does:
// params are encoded by openai-go's own encoder (param.Opt, SetExtraFields),
// routed and sent by the Executor, and the committed body is read here, with
// tps's SSE framer.
func (c *Client) newStream(ctx context.Context, params openai.ChatCompletionNewParams, opts []CallOption, stream bool) *Stream {
	ctx, cancel := context.WithCancel(ctx)
	st := &callState{cfg: buildCallConfig(opts), stream: stream}
	s := &Stream{c: c, st: st, cancel: cancel}
	body, err := json.Marshal(params)
	if err != nil {
		err = &RequestError{Reason: "encoding the request: " + err.Error()}
	} else {
		var info requestInfo
		if info, err = readRequest(body); err == nil {
			st.res, err = c.do(ctx, body, info, nil, &st.cfg, stream)
		}
	}
	if err != nil {
		st.err = err
		s.ended.Store(true)
		s.fail(err)
		return s
	}
	s.body = st.res.Body
	s.sse.Reset(s.body, c.maxEvent)
	return s
}

// Next advances to the next chunk and reports whether there is one. It
// returns false at the end of the stream, after a failure and after Close.
func (s *Stream) Next() bool {
	if s.done.Load() {
		return false
	}
	s.decoded, s.deltaOK = false, false
	if s.sse.Next() {
		data := s.sse.Data()
		// As openai-go's ssestream.Stream: [DONE] ends, an "error" key is a
		// *ssestream.StreamError, and a chunk that is not JSON ends the
		// stream with the decoder's error.
		switch {
		case bytes.HasPrefix(data, doneData):
			// the end, below
		case bytes.Contains(data, errorKey) && gjson.GetBytes(data, "error").Exists():
			ev := ssestream.Event{Type: string(s.sse.Name()), Data: bytes.Clone(data)}
			s.ended.Store(true)
			s.fail(&ssestream.StreamError{
				Message: fmt.Sprintf("received error while streaming: %s", gjson.GetBytes(data, "error").String()),
				Event:   ev,
			})
			return false
		case payload.ParseChunk(data, &s.chunk) != nil:
			s.ended.Store(true)
			var cur openai.ChatCompletionChunk
			err := json.Unmarshal(data, &cur)
			if err == nil {
				err = tps.ErrMalformed
			}
			s.fail(err)
			return false
		default:
			return true
		}
	}
	if s.done.Load() {
		return false // closed by Close
	}
	s.ended.Store(true)
	if err := s.sse.Err(); err != nil {
		s.fail(err)
		return false
	}
	s.finish()
	return false
}

var (
	doneData = []byte("[DONE]")
	errorKey = []byte(`"error"`)
)

// Current returns the chunk Next advanced to, decoded by openai-go on the
// first call for each chunk.
func (s *Stream) Current() openai.ChatCompletionChunk {
	if len(s.sse.Data()) == 0 || s.done.Load() {
		return openai.ChatCompletionChunk{}
	}
	if !s.decoded {
		s.decoded = true
		if s.cur == nil {
			s.cur = new(openai.ChatCompletionChunk)
		} else {
			*s.cur = openai.ChatCompletionChunk{}
		}
		_ = json.Unmarshal(s.sse.Data(), s.cur) // Next checked it is a JSON object
	}
	return *s.cur
}

// Delta is what the chunk Next advanced to says, scanned without decoding it
// into an openai.ChatCompletionChunk. Content, Reasoning and Refusal are the
// chunk's text with JSON escapes resolved, joined over its choices in order
// (a single choice unless n > 1); ToolCalls are its tool-call fragments. Byte
// slices and Chunk are valid only until the next call of Next; copy what you
// keep. Reasoning, which openai-go's chunk keeps only among its extra fields,
// is reasoning_content or reasoning.
type Delta struct {
	Content   []byte
	Reasoning []byte
	Refusal   []byte
	ToolCalls []ToolCallDelta
	// FinishReason is the last non-null finish_reason of the chunk, empty
	// when none.
	FinishReason []byte
	// Usage is the chunk's usage block, nil when it carried none.
	Usage *tps.Usage
}

// ToolCallDelta is one tool-call fragment of a Delta, text decoded. Arguments
// arrive in pieces; join them per (Choice, Index).
type ToolCallDelta struct {
	Choice    int64  // the index of the choice it belongs to
	Index     int64  // tool_calls[].index
	ID        []byte // tool_calls[].id, empty after the first fragment
	Type      []byte // tool_calls[].type
	Name      []byte // tool_calls[].function.name
	Arguments []byte // tool_calls[].function.arguments
}

// Delta returns what the chunk Next advanced to says, without decoding it:
// the text path. After the first chunk's buffers have grown it allocates
// nothing. It is the zero Delta before the first Next and after the end.
func (s *Stream) Delta() Delta {
	if s.deltaOK {
		return s.delta
	}
	s.deltaOK = true
	if s.done.Load() || len(s.sse.Data()) == 0 {
		s.delta = Delta{}
		return s.delta
	}
	c := &s.chunk
	text := s.text[:0]
	var span [3][2]int
	for f := range span {
		span[f][0] = len(text)
		for i := range c.Choices {
			ch := &c.Choices[i]
			text = payload.AppendUnescaped(text, [3][]byte{ch.Content, ch.Reasoning, ch.Refusal}[f])
		}
		span[f][1] = len(text)
	}
	// Every field is appended to text first and sliced after, since text
	// may move while it grows.
	ends := s.ends[:0]
	for _, t := range c.ToolCalls {
		for _, raw := range [4][]byte{t.ID, t.Type, t.Name, t.Arguments} {
			text = payload.AppendUnescaped(text, raw)
			ends = append(ends, len(text))
		}
	}
	field := func(from, to int) []byte { return text[from:to:to] }
	d := Delta{FinishReason: c.FinishReason,
		Content:   field(span[0][0], span[0][1]),
		Reasoning: field(span[1][0], span[1][1]),
		Refusal:   field(span[2][0], span[2][1]),
	}
	tools := s.tools[:0]
	pos := span[2][1]
	for i, t := range c.ToolCalls {
		e := ends[4*i : 4*i+4]
		tools = append(tools, ToolCallDelta{Choice: t.Choice, Index: t.Index,
			ID: field(pos, e[0]), Type: field(e[0], e[1]), Name: field(e[1], e[2]), Arguments: field(e[2], e[3])})
		pos = e[3]
	}
	if len(tools) > 0 {
		d.ToolCalls = tools
	}
	if c.HasUsage {
		d.Usage = (*tps.Usage)(&c.Usage) // the parser's usage block has tps.Usage's fields
	}
	s.text, s.tools, s.ends = text, tools, ends
	s.delta = d
	return d
}

// Err returns the error that ended the stream, or nil after a clean end or an
// early Close. Routing errors wrap route.ErrNoDeployment; failover failures
// and mid-stream failures are *fallback.Error, whose attempts unwrap to each
// provider's *openai.Error. A caller's cancellation matches context.Canceled.
func (s *Stream) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Close ends the stream. Before the end it cancels the upstream request at
// once; the attempt counts as cancelled, not as a provider failure. Close is
// idempotent and returns nil.
func (s *Stream) Close() error {
	s.closeOnce.Do(func() {
		s.done.Store(true)
		// Closing the body before the end cancels the upstream request at
		// once; fallback records it as the caller's cancellation (ErrClosed).
		if s.body != nil {
			_ = s.body.Close()
		}
		s.cancel()
		endCall(&s.st.cfg, s.st.res, s.Err())
	})
	return nil
}

// fail ends the stream with err, preferring the executor's own error over
// openai-go's wrapping of it.
func (s *Stream) fail(err error) {
	if s.st.err != nil {
		err = s.st.err
	} else {
		var fe *fallback.Error
		if errors.As(err, &fe) {
			err = fe
		}
	}
	s.mu.Lock()
	s.err = err
	s.mu.Unlock()
	_ = s.Close()
}

// finish ends a stream that completed cleanly.
func (s *Stream) finish() { _ = s.Close() }

// Outcome returns what became of the call so far: the deployment that
// answered, its tps.Sample (complete once Next has returned false or the
// Stream was closed), every attempt and Err. Zero Deployment and Sample if no
// attempt answered.
func (s *Stream) Outcome() Outcome {
	err := s.Err()
	if err == nil {
		err = s.st.err
	}
	return outcomeOf(s.st.res, err)
}

// readAll reads and closes a request body.
func readAll(req *http.Request) ([]byte, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return nil, &RequestError{Reason: "request has no body"}
	}
	defer req.Body.Close()
	b, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, &RequestError{Reason: "read request body: " + err.Error()}
	}
	return b, nil
}
