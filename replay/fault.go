package replay

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/tpsroute/tpsroute/tps"
)

// Fault is one injected failure, applied to a Script's answer by WithFaults.
// By default a Fault applies to every request; OnAttempts, FromAttempt and
// During narrow it, and they combine (all must hold). A Fault is an immutable
// value, safe for concurrent use; the selector methods return modified copies.
type Fault struct {
	name  string
	apply func(p *plan, r *request)
	when  []func(r *request) bool
}

// String returns the fault's name with its arguments, e.g. "cut-after(3)".
func (f Fault) String() string { return f.name }

// OnAttempts returns f applying only to the given attempt numbers (1-based,
// counted per model on the handler).
func (f Fault) OnAttempts(n ...int) Fault {
	ns := slices.Clone(n)
	return f.and(fmt.Sprintf("on-attempts%v", ns), func(r *request) bool { return slices.Contains(ns, r.attempt) })
}

// FromAttempt returns f applying only to attempt n and later.
func (f Fault) FromAttempt(n int) Fault {
	return f.and("from-attempt("+strconv.Itoa(n)+")", func(r *request) bool { return r.attempt >= n })
}

// During returns f applying only to requests arriving in [from, to) after the
// handler's creation (time.Now, so synctest virtual time works). A zero or
// negative to means no upper bound.
func (f Fault) During(from, to time.Duration) Fault {
	return f.and(fmt.Sprintf("during(%v,%v)", from, to), func(r *request) bool {
		return r.elapsed >= from && (to <= 0 || r.elapsed < to)
	})
}

// named returns f under another name.
func (f Fault) named(name string) Fault {
	f.name = name
	return f
}

func (f Fault) and(name string, pred func(*request) bool) Fault {
	g := f
	g.name = f.name + "." + name
	g.when = append(slices.Clip(f.when), pred)
	return g
}

func (f Fault) active(r *request) bool {
	for _, w := range f.when {
		if !w(r) {
			return false
		}
	}
	return f.apply != nil
}

// WithFaults returns a Script that answers like s with the faults applied in
// order to every request they select. Faults compose: Status replaces the
// answer, the stream faults rewrite the events of a streaming answer and are
// no-ops on an error answer. A nil s panics.
func WithFaults(s Script, faults ...Fault) Script {
	if s == nil {
		panic("replay: WithFaults with nil Script")
	}
	return &faulted{inner: s, faults: slices.Clone(faults)}
}

type faulted struct {
	inner  Script
	faults []Fault
}

func (*faulted) sealed() {}

func (f *faulted) plan(r *request) *plan {
	p := f.inner.plan(r)
	for _, ft := range f.faults {
		if ft.active(r) {
			ft.apply(p, r)
			p.faults = append(p.faults, ft.name)
		}
	}
	return p
}

// Status answers with an HTTP status, a body and extra headers instead of the
// script's answer. An empty body means an error body for the status in the
// shape of the request's API: Anthropic's on .../messages
// ({"type":"error","error":{"type":"overloaded_error",...}} for 529),
// OpenAI's elsewhere.
func Status(code int, body string, header http.Header) Fault {
	h := header.Clone()
	return Fault{name: "status(" + strconv.Itoa(code) + ")", apply: func(p *plan, r *request) {
		p.setStatus(code, cmp.Or(body, statusBody(code, r.proto)), h)
	}}
}

// RateLimited answers 429 rate_limit_exceeded with "Retry-After: retryAfter"
// (seconds, e.g. "2", or an HTTP-date) and x-ratelimit-remaining-requests: 0.
func RateLimited(retryAfter string) Fault {
	h := http.Header{}
	if retryAfter != "" {
		h.Set("Retry-After", retryAfter)
	}
	h.Set("x-ratelimit-remaining-requests", "0")
	return Status(http.StatusTooManyRequests, "", h).named("rate-limited(" + retryAfter + ")")
}

// RetryAfterMS answers 429 with "retry-after-ms: ms" and, rounded up,
// "Retry-After" in seconds, as OpenAI does.
func RetryAfterMS(ms int) Fault {
	h := http.Header{}
	h.Set("retry-after-ms", strconv.Itoa(ms))
	h.Set("Retry-After", strconv.Itoa((ms+999)/1000))
	return Status(http.StatusTooManyRequests, "", h).named("retry-after-ms(" + strconv.Itoa(ms) + ")")
}

// RetryAfterDate answers 429 with Retry-After as an HTTP-date d after the
// request's arrival, rounded up to the next whole second.
func RetryAfterDate(d time.Duration) Fault {
	return Fault{name: "retry-after-date(" + d.String() + ")", apply: func(p *plan, r *request) {
		t := r.start.Add(d).Truncate(time.Second)
		if t.Before(r.start.Add(d)) {
			t = t.Add(time.Second)
		}
		h := http.Header{}
		h.Set("Retry-After", t.UTC().Format(http.TimeFormat))
		p.setStatus(http.StatusTooManyRequests, statusBody(http.StatusTooManyRequests, r.proto), h)
	}}
}

// InsufficientQuota answers 429 with code insufficient_quota: the same status
// as a rate limit, but one a client must not retry.
func InsufficientQuota() Fault {
	return Status(http.StatusTooManyRequests, errorBody("replay: you exceeded your current quota", "insufficient_quota", "insufficient_quota"), nil).named("insufficient-quota")
}

// ContextLengthExceeded answers 400 with code context_length_exceeded.
func ContextLengthExceeded() Fault {
	return Status(http.StatusBadRequest, errorBody("replay: this model's maximum context length is exceeded", "invalid_request_error", "context_length_exceeded"), nil).named("context-length-exceeded")
}

// ContentPolicy answers 400 with code content_policy_violation.
func ContentPolicy() Fault {
	return Status(http.StatusBadRequest, errorBody("replay: the prompt was rejected by the content policy", "invalid_request_error", "content_policy_violation"), nil).named("content-policy")
}

// Unauthorized answers 401 with code invalid_api_key.
func Unauthorized() Fault {
	return Status(http.StatusUnauthorized, "", nil).named("unauthorized")
}

// ResetBeforeHeaders aborts the connection instead of answering: over TCP the
// connection is hijacked and closed; through Handler.Transport the round trip
// returns an error wrapping ErrConnReset.
func ResetBeforeHeaders() Fault {
	return Fault{name: "reset-before-headers", apply: func(p *plan, _ *request) {
		p.before = beforeReset
	}}
}

// Hang never answers: no headers, until the request's context ends or the
// server closes.
func Hang() Fault {
	return Fault{name: "hang", apply: func(p *plan, _ *request) {
		p.before = beforeHang
	}}
}

// SlowFirstToken delays the first output chunk, and everything after it, by
// d. Output is as the tap reads the script's API: a chat chunk with
// content, a Responses or Messages output delta, an embeddings answer. Headers and earlier events (role chunk, comments) are sent on time.
func SlowFirstToken(d time.Duration) Fault {
	return Fault{name: "slow-first-token(" + d.String() + ")", apply: func(p *plan, _ *request) {
		for i, e := range p.events {
			if e.output {
				p.shiftFrom(i, d)
				return
			}
		}
	}}
}

// CutAfter aborts the connection after k chunks (data events other than
// [DONE]): no terminator, so the client sees an unexpected EOF, not a clean
// end. Comments do not count. With fewer than k chunks the connection is
// aborted after the last one, still without [DONE]; k <= 0 aborts right
// after the headers.
func CutAfter(k int) Fault {
	return Fault{name: "cut-after(" + strconv.Itoa(k) + ")", apply: func(p *plan, _ *request) {
		if p.body != nil {
			return
		}
		at := p.headersAt
		switch i := p.chunkIndex(k); {
		case i >= 0:
			at = p.events[i].at
			p.events = p.events[:i+1]
		case k <= 0:
			p.events = p.events[:0]
		default:
			// Fewer than k chunks: cut after the last one. The terminator
			// goes too, so the cut never reads as a clean end.
			p.events = slices.DeleteFunc(p.events, event.done)
			at = p.lastAt()
		}
		p.end = endReset
		p.endAt = at
		p.outcome = "cut"
	}}
}

// StallAfter pauses for d after k chunks, then continues normally.
func StallAfter(k int, d time.Duration) Fault {
	return Fault{name: fmt.Sprintf("stall-after(%d,%v)", k, d), apply: func(p *plan, _ *request) {
		if i := p.chunkIndex(k); i >= 0 {
			p.shiftFrom(i+1, d)
		}
	}}
}

// MalformedAt replaces chunk k (1-based) with invalid JSON: the chunk's first
// half, so a parser fails on it.
func MalformedAt(k int) Fault {
	return Fault{name: "malformed-at(" + strconv.Itoa(k) + ")", apply: func(p *plan, _ *request) {
		if i := p.chunkIndex(k); i >= 0 {
			e := &p.events[i]
			e.kind = eventData
			e.data = e.data[:len(e.data)/2]
			e.output = false
		}
	}}
}

// ErrorEventAt replaces chunk k (1-based) and everything after it with an
// in-stream error event inside the HTTP 200, in the style's shape: OpenAI
// sends {"error":{"message","type"}} and ends without [DONE]; VLLM sends
// {"error":{...,"code":400}} followed by [DONE]; ProcessingComments
// (OpenRouter) sends a top-level error plus choices with finish_reason
// "error" and no [DONE]; UsageTwice (Groq) sends an "event: error" frame with
// an error body and no [DONE]; Responses sends its flat error event
// ("event: error", type, code, message, param) and Messages an
// "event: error" with overloaded_error. Other styles use the OpenAI shape.
func ErrorEventAt(k int, style Style) Fault {
	return Fault{name: "error-event-at(" + strconv.Itoa(k) + "," + style.String() + ")", apply: func(p *plan, _ *request) {
		if p.body != nil {
			return
		}
		i := p.chunkIndex(k)
		if i < 0 {
			i = len(p.events)
			for j, e := range p.events {
				if e.done() {
					i = j
				}
			}
		}
		at := p.headersAt
		if i < len(p.events) {
			at = p.events[i].at
		} else if i > 0 {
			at = p.events[i-1].at
		}
		p.events = p.events[:i]
		switch style {
		case VLLM:
			p.events = append(p.events,
				event{at: at, kind: eventData, data: `{"error":{"object":"error","message":"replay: internal server error during generation","type":"BadRequestError","param":null,"code":400}}`},
				event{at: at, kind: eventData, data: "[DONE]"})
		case UsageTwice:
			p.events = append(p.events, event{at: at, kind: eventData, name: "error", data: `{"error":{"message":"replay: service unavailable","type":"internal_server_error"}}`})
		case ProcessingComments:
			p.events = append(p.events, event{at: at, kind: eventData, data: `{"id":"gen-replay","object":"chat.completion.chunk","created":0,"model":"replay","error":{"code":502,"message":"replay: upstream provider error"},"choices":[{"index":0,"delta":{"content":""},"finish_reason":"error","native_finish_reason":"error"}]}`})
		case Responses:
			p.events = append(p.events, event{at: at, kind: eventData, name: "error", data: `{"type":"error","sequence_number":0,"code":"server_error","message":"replay: the server had an error while processing your request","param":null}`})
		case Messages:
			p.events = append(p.events, event{at: at, kind: eventData, name: "error", data: `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`})
		default:
			p.events = append(p.events, event{at: at, kind: eventData, data: `{"error":{"message":"replay: the server had an error while processing your request","type":"server_error","param":null,"code":null}}`})
		}
		p.end = endEOF
		p.endAt = at
		p.outcome = "error_event"
	}}
}

// NoDone removes the [DONE] terminator: the stream ends with a clean EOF
// after the last chunk.
func NoDone() Fault {
	return Fault{name: "no-done", apply: func(p *plan, _ *request) {
		p.events = slices.DeleteFunc(p.events, event.done)
	}}
}

// KeepAlivesBeforeFirstToken sends n ": keep-alive" comments, interval apart
// starting at the first output chunk's planned time, and delays that chunk and
// everything after it by n*interval. n <= 0 changes nothing.
func KeepAlivesBeforeFirstToken(n int, interval time.Duration) Fault {
	return Fault{name: fmt.Sprintf("keep-alives(%d,%v)", n, interval), apply: func(p *plan, _ *request) {
		if n <= 0 {
			return
		}
		for i, e := range p.events {
			if !e.output {
				continue
			}
			p.shiftFrom(i, time.Duration(n)*interval)
			ka := make([]event, n)
			for j := range ka {
				ka[j] = event{at: e.at + time.Duration(j)*interval, kind: eventComment, data: "keep-alive"}
			}
			p.events = slices.Insert(p.events, i, ka...)
			return
		}
	}}
}

// DownFor answers 503 to every request arriving in the first d after the
// handler's creation, then lets the script answer (flapping).
func DownFor(d time.Duration) Fault {
	return Status(http.StatusServiceUnavailable, "", nil).During(0, d).named("down-for(" + d.String() + ")")
}

// RejectPrefill answers 400 when the last message is from the assistant, as
// providers without assistant prefill do: in OpenAI's error shape, or in
// Anthropic's ({"type":"error","error":{"type":"invalid_request_error",...}})
// on the Messages API's path.
func RejectPrefill() Fault {
	const msg = "replay: the last message must be from the user or a tool; assistant prefill is not supported"
	body := errorBody(msg, "invalid_request_error", "")
	anthropic := `{"type":"error","error":{"type":"invalid_request_error","message":` + jsonString(msg) + `}}`
	return Fault{name: "reject-prefill", apply: func(p *plan, r *request) {
		if r.body.lastRole() != "assistant" {
			return
		}
		if r.proto == tps.ProtocolMessages {
			p.setStatus(http.StatusBadRequest, anthropic, nil)
			return
		}
		p.setStatus(http.StatusBadRequest, body, nil)
	}}
}

// SlowAfter slows the stream down after k chunks: from then on the output
// chunks follow one another 1/tps seconds apart (a provider that keeps
// generating, ever more slowly), and the events after the last output chunk
// (finish, usage, [DONE]) keep their delay behind it. The text does not
// change. Earlier chunks keep their times; tps <= 0 or a stream of at most
// k chunks changes nothing.
func SlowAfter(k int, tps float64) Fault {
	return Fault{name: fmt.Sprintf("slow-after(%d,%v)", k, tps), apply: func(p *plan, _ *request) {
		i := p.chunkIndex(k)
		if tps <= 0 || i < 0 {
			return
		}
		gap := time.Duration(float64(time.Second) / tps)
		at, prev, shift := p.events[i].at, p.events[i].at, time.Duration(0)
		for j := i + 1; j < len(p.events); j++ {
			e := &p.events[j]
			if e.output {
				at += gap
			} else {
				at += e.at - prev // a non-output event keeps its distance
			}
			prev = e.at
			shift = at - e.at
			e.at = at
		}
		if p.endAt > 0 {
			p.endAt += shift
		}
	}}
}
