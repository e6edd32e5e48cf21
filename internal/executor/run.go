package executor

import (
	"cmp"
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tpsroute/tpsroute/fallback"
	"github.com/tpsroute/tpsroute/internal/answer"
	"github.com/tpsroute/tpsroute/internal/payload"
	"github.com/tpsroute/tpsroute/internal/redact"
	"github.com/tpsroute/tpsroute/internal/sse"

	"github.com/openai/openai-go/v3"

	"github.com/tpsroute/tpsroute/route"
	"github.com/tpsroute/tpsroute/tps"
)

// maxErrorBody bounds how much of an error response is read.
const maxErrorBody = 64 << 10

// run is one attempt on one deployment. Its read side (open, fill, the
// stream) is used by one goroutine at a time; timers and Close touch only the
// atomics, the context and the timer fields under tmu. Its state is grouped
// by concern in the embedded clock (deadlines), seen (what the tap
// observed) and delivery (byte-exact release of the body).
type run struct {
	cl     *call
	i      int
	d      *route.Deployment
	st     *keyState
	sc     *redact.Scrubber // d's credentials: nothing of the upstream's leaves unscrubbed
	done   func(error)      // breaker outcome (local and Hooks.Shared)
	fb     Done             // the call's Feedback handle for this attempt; may be nil
	ctx    context.Context
	cancel context.CancelCauseFunc
	start  time.Time
	waited time.Duration
	body   []byte

	resp *http.Response
	tap  io.ReadCloser
	acc  *answer.Accumulator // the answer of an assembling chat call (Call.Assemble), from observe
	// final is the answer of an assembling Responses call: the response
	// object of its final event (payload.Chunk.Answer), copied from observe.
	final []byte

	clock
	seen
	delivery
	rescue // the slow-stream watch (rescue.go)

	quiet bool // a finished stream ended by our deadline, not by EOF

	msg *msgSplice // a Messages stream that may be continued (splice.go); nil otherwise

	sampled   bool
	sample    tps.Sample
	finalized bool
	att       fallback.Attempt // the failure, once open returned false
}

// clock is a run's deadline state: which deadline applies (see due) and the
// timer that enforces it (see onTimer).
type clock struct {
	canFailover bool          // the TTFT deadline may abandon this run
	ttftTO      time.Duration // this run's TTFT deadline; see call.ttftFor

	tmu        sync.Mutex
	timersOff  bool
	timer      *time.Timer   // see onTimer
	firesAt    time.Duration // when timer fires, as time since start; 0: not armed (stopped, or fired and not reset)
	outputSeen atomic.Bool   // the first output chunk arrived: stall, not TTFT
	finished   atomic.Bool   // a finish_reason for every choice, or [DONE]: grace, not stall
	headersIn  atomic.Bool
	lastOut    atomic.Int64 // ns since start of the last output chunk
	lastEvent  atomic.Int64 // ns since start of the last data event (comments excluded)
	lastByte   atomic.Int64 // ns since start of the headers or the last read, before output, when !canFailover
}

// seen is what the tap observed of a run's stream, written during Read.
type seen struct {
	output, finish, sawDone, toolCalls, multi, reasoning, malformed bool
	tooLarge                                                        bool   // past Options.Limits: ErrTooLarge
	plain                                                           bool   // a plain upstream call (plain.go)
	plainAnswer                                                     []byte // the JSON answer read whole (unstream), nil for a stream
	errBody                                                         []byte
	finishes                                                        int64
	keepText                                                        bool
	text                                                            []byte
}

// delivery is the byte-exact release of a run's body to the caller.
// stopped: a failing event (an in-stream error, a malformed event that is
// not skipped) began at body offset stopAt; nothing from it on is released
// and later events are ignored. cuts are skipped malformed events, excised
// from buf before release. marks pair the end offset of each output event
// with len(text) after it; relText is the length of text whose events were
// released, which the caller has received once buf[off:rel] is read.
type delivery struct {
	stopped    bool
	stopAt     int64
	cuts       []span
	marks      []mark
	relText    int
	malformedN int
	readErr    error // the read error fill returned, sticky

	buf      []byte
	bufp     *[]byte // from Executor.bufs, returned by releaseBuf
	rel, off int     // buf[off:rel] is released and unread; buf[rel:] is held back
	base     int64   // body offset of buf[0], excised bytes counted
	eof      bool
}

func (cl *call) newRun(i int, d *route.Deployment, st *keyState, done func(error), body []byte, canFailover bool) *run {
	a := &run{cl: cl, i: i, d: d, st: st, done: done, body: body, waited: cl.waited}
	cl.waited = 0
	cl.pending.Add(1)
	a.ctx, a.cancel = context.WithCancelCause(cl.ctx)
	a.keepText = cl.keepText
	if cl.keepText && cl.protocol == tps.ProtocolMessages {
		a.msg = new(msgSplice)
	}
	if cl.assemble && cl.protocol == tps.ProtocolChat {
		a.takeAccumulator()
	}
	a.sc = st.scrubberFor(d)
	a.start = time.Now()
	if cl.fb != nil {
		a.fb = cl.fb.Begin(i, d)
	}
	a.canFailover = canFailover
	a.ttftTO = cl.ttftFor(i, d, canFailover, a.start)
	a.rescue.slowUnder = cl.watch(i)
	a.plain = cl.plainOn(d)
	a.rearm()
	return a
}

// due returns the time until the next deadline after el (time since start;
// negative: none), or the cause of the one that has passed. The deadlines
// are the ceiling (MaxDuration) and, by phase: headers and TTFT (when the
// call can fail over) before the first output chunk; the stall deadline
// after it; the finish grace once the stream has finished. Only output
// chunks move the stall deadline and only data events the grace; comments
// move nothing.
func (a *run) due(el time.Duration) (wait time.Duration, cause error) {
	cl := a.cl
	wait = -1
	at := func(t time.Duration, c error) bool {
		if el >= t {
			cause = c
			return true
		}
		if wait < 0 || t-el < wait {
			wait = t - el
		}
		return false
	}
	if cl.dl.MaxDuration > 0 && at(cl.dl.MaxDuration, fallback.ErrMaxDuration) {
		return 0, cause
	}
	switch {
	case a.finished.Load() && cl.dl.FinishGrace > 0:
		if at(time.Duration(a.lastEvent.Load())+cl.dl.FinishGrace, errFinished) {
			return 0, cause
		}
	case a.outputSeen.Load():
		if cl.dl.Stall > 0 && at(time.Duration(a.lastOut.Load())+cl.dl.Stall, fallback.ErrStall) {
			return 0, cause
		}
	default:
		headers := a.headersIn.Load()
		if a.plain { // the headers and the answer come when it is done
			break
		}
		if !headers && cl.dl.Headers > 0 && at(cl.dl.Headers, fallback.ErrHeadersTimeout) {
			return 0, cause
		}
		if a.canFailover && a.ttftTO > 0 && at(a.ttftTO, fallback.ErrTTFTTimeout) {
			if !headers {
				cause = fallback.ErrHeadersTimeout // nothing at all came back in time
			}
			return 0, cause
		}
		// With nowhere to go the slow answer is awaited, but not a silent
		// one: Silence bounds the wait from the headers or the last byte
		// read (a comment counts: it says the upstream is alive).
		if !a.canFailover && headers && cl.dl.Silence > 0 && at(time.Duration(a.lastByte.Load())+cl.dl.Silence, fallback.ErrSilent) {
			return 0, cause
		}
	}
	return wait, nil
}

// onTimer is the run's one timer: it ends the run with the deadline that has
// passed, or waits for the next one.
func (a *run) onTimer() {
	a.tmu.Lock()
	defer a.tmu.Unlock()
	a.firesAt = 0 // it fired
	if a.timersOff {
		return
	}
	el := time.Since(a.start)
	if wait, cause := a.due(el); cause != nil {
		a.cancel(cause)
	} else if wait > 0 {
		a.timer.Reset(wait)
		a.firesAt = el + wait
	}
}

// rearm points the timer at the next deadline after a phase change (start,
// first output, finish). A deadline that moves later needs no rearm (the
// stall and grace deadlines on every chunk; the stall deadline that follows
// the headers or TTFT deadline at the first output): the timer fires first,
// and onTimer checks again. Only an earlier deadline (the finish grace)
// resets it: each start or reset of a timer may wake the runtime's network
// poller (on Linux a system call and a woken thread), which a short call
// then pays twice instead of three times.
func (a *run) rearm() {
	a.tmu.Lock()
	defer a.tmu.Unlock()
	if a.timersOff {
		return
	}
	el := time.Since(a.start)
	wait, cause := a.due(el)
	switch {
	case cause != nil:
		a.cancel(cause)
	case wait < 0:
		if a.timer != nil {
			a.timer.Stop()
			a.firesAt = 0
		}
	case a.firesAt > 0 && a.firesAt <= el+wait:
		// Armed for no later than the new deadline: onTimer rearms then.
	case a.timer == nil:
		a.timer = time.AfterFunc(wait, a.onTimer)
		a.firesAt = el + wait
	default:
		a.timer.Reset(wait)
		a.firesAt = el + wait
	}
}

// open sends the request and reads up to the commit point: the first output
// chunk for a streaming call, the end of the stream otherwise. It returns true
// when the run committed; otherwise it has finalized the run and a.att holds
// the failure.
func (a *run) open(stream bool) bool {
	body, err := a.body, error(nil)
	if a.plain {
		body, err = plainBody(body)
	}
	var req *http.Request
	if err == nil {
		req, err = a.cl.build(a.ctx, *a.d, body)
	}
	if err != nil {
		a.fail(tps.PhaseConnect, 0, fallback.ClassInvalid, err)
		return false
	}
	resp, ok := a.send(req)
	if !ok {
		return false
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		a.httpError(req, resp)
		return false
	}
	if a.st.learnt.Load() {
		a.st.mu.Lock()
		a.st.conc.admitted(time.Now(), a.st.others())
		a.st.mu.Unlock()
	}
	limit := a.cl.e.opts.Limits.Event
	if a.plain || isJSONAnswer(resp) {
		limit = max(limit, a.unstream(resp))
	}
	maxEvent := tps.WithMaxEvent(limit)
	proto := tps.WithProtocol(a.cl.protocol)
	if tk := a.cl.e.hooks.Tokenizer; tk != nil {
		a.tap = tps.NewTap(resp.Body, a.start, a.onSample, withObserver(a.observe), maxEvent, proto, tps.WithTokenizer(tk))
	} else {
		a.tap = tps.NewTap(resp.Body, a.start, a.onSample, withObserver(a.observe), maxEvent, proto)
	}
	return a.readToCommit(stream)
}

// send sends req and returns the response headers; on a connect or headers
// failure it fails the run and returns false.
func (a *run) send(req *http.Request) (*http.Response, bool) {
	resp, err := a.cl.e.transport.RoundTrip(req)
	if !a.canFailover {
		a.lastByte.Store(int64(time.Since(a.start)))
	}
	a.headersIn.Store(true)
	if err != nil {
		if resp != nil && resp.Body != nil {
			resp.Body.Close()
		}
		class, cause := a.cause(err, fallback.ClassRetry)
		phase := tps.PhaseConnect
		if errors.Is(cause, fallback.ErrHeadersTimeout) {
			phase = tps.PhaseHeaders
		}
		a.fail(phase, 0, class, cause)
		return nil, false
	}
	a.resp = resp
	if resp.StatusCode != http.StatusTooManyRequests {
		a.st.noteRateLimit(resp.Header, time.Now) // a 429's: httpError
	}
	if resp.Body == nil {
		resp.Body = http.NoBody
	}
	return resp, true
}

// readToCommit reads the body through the tap until the run commits: at its
// first output chunk when streaming, at the stream's clean end otherwise.
// It reports false, with the run failed, when the stream fails first.
func (a *run) readToCommit(stream bool) bool {
	for {
		if a.output && stream {
			return true
		}
		err := a.fill()
		if class, ferr := a.streamFailure(err); ferr != nil {
			a.failRead(class, ferr)
			return false
		}
		if a.eof {
			if !a.output && !a.finish {
				a.fail(tps.PhaseFirstToken, a.resp.StatusCode, fallback.ClassNext, fallback.ErrEmptyStream)
				return false
			}
			if !stream {
				if a.cl.assemble && !a.answer() { // a Responses stream without its response object
					a.failRead(fallback.ClassNext, fallback.ErrMalformed)
					return false
				}
				a.succeed()
			}
			return true
		}
	}
}

// failRead fails the run for ferr (class), found while reading its stream:
// before the first output in PhaseFirstToken; after it, whichever door the
// call used, in PhaseMidStream with the class and ErrMidStream a streaming
// caller gets.
func (a *run) failRead(class fallback.Class, ferr error) {
	phase := tps.PhaseFirstToken
	if a.output {
		phase = tps.PhaseMidStream
		if class != fallback.ClassPolicy && class != fallback.ClassCanceled {
			class = fallback.ClassMidStream
		}
		ferr = wrap(fallback.ErrMidStream, ferr)
	}
	a.fail(phase, a.resp.StatusCode, class, ferr)
}

// streamFailure turns the state after a fill into the stream's failure, if
// any: an in-stream error, a malformed event, a cut or a deadline.
func (a *run) streamFailure(err error) (fallback.Class, error) {
	switch {
	case a.errBody != nil:
		pe := parseErrorBody(a.errBody)
		pe.scrub(a.sc)
		// Most in-stream errors carry no status: read them as a 4xx so that
		// a content-policy or context-length reason is still recognised.
		class := classifyStatus(cmp.Or(pe.Status, http.StatusBadRequest), &pe)
		if class == fallback.ClassInvalid || class == fallback.ClassRetry {
			// The request was accepted (HTTP 200) before it failed: another
			// deployment may well do better.
			class = fallback.ClassNext
		}
		api := newAPIError(cmp.Or(pe.Status, http.StatusOK), &pe, redact.Request(a.resp.Request), nil)
		return class, wrap(fallback.ErrStreamError, withReason(api, class, &pe))
	case a.tooLarge:
		return fallback.ClassNext, fallback.ErrTooLarge
	case a.malformed:
		return fallback.ClassNext, fallback.ErrMalformed
	case err == nil:
		return fallback.ClassNone, nil
	case err == io.EOF && a.ctx.Err() == nil: // a cancelled pipe may also read as EOF
		if a.finished.Load() || !a.output {
			a.eof = true
			a.release(len(a.buf)) // flush a final event without its blank line
			return fallback.ClassNone, nil
		}
		return fallback.ClassNext, fallback.ErrTruncated
	}
	class, cause := a.cause(err, fallback.ClassNext)
	if a.finished.Load() && (cause == errFinished || cause == fallback.ErrStall || cause == fallback.ErrMaxDuration) {
		// Silence or endless trailing events after the finish (docs/STREAM_QUIRKS.md Q2, Q5): the
		// answer is complete. A partial event after the last blank line is
		// dropped, not flushed: it was cut, not ended.
		a.eof = true
		a.quiet = true
		return fallback.ClassNone, nil
	}
	return class, cause
}

// cause names why a read or round trip failed: the caller, one of our
// deadlines, or the transport (then class def).
func (a *run) cause(err error, def fallback.Class) (fallback.Class, error) {
	if a.cl.ctx.Err() != nil {
		return fallback.ClassCanceled, context.Cause(a.cl.ctx)
	}
	if a.ctx.Err() != nil {
		switch c := context.Cause(a.ctx); c {
		case fallback.ErrHeadersTimeout, fallback.ErrTTFTTimeout, fallback.ErrSilent, fallback.ErrMaxDuration, errFinished:
			return fallback.ClassNext, c
		case fallback.ErrStall:
			return fallback.ClassMidStream, c
		case fallback.ErrHedgeLost, fallback.ErrClosed:
			return fallback.ClassCanceled, c
		}
	}
	return def, err
}

func (a *run) httpError(req *http.Request, resp *http.Response) {
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	resp.Body.Close()
	now := time.Now()
	pe := parseErrorBody(raw)
	pe.scrub(a.sc)
	class := classify(resp.StatusCode, resp.Header, &pe)
	// The error keeps a copy of the response whose Request is redacted too:
	// resp.Request is the request as sent, credentials included.
	rc := *resp
	rc.Request, rc.Body = redact.Request(req), http.NoBody
	rc.Header = relayHeader(resp.Header, a.sc)
	err := withReason(newAPIError(resp.StatusCode, &pe, rc.Request, &rc), class, &pe)
	ra, hasRA := retryAfter(resp.Header, now)
	st := a.st
	switch class {
	case fallback.ClassRateLimited:
		if !hasRA {
			st.mu.Lock()
			n := st.limited
			st.limited++
			st.mu.Unlock()
			ra, hasRA = a.cl.e.jitter(n), true
		}
	case fallback.ClassAuth, fallback.ClassUnavailable:
		ra, hasRA = max(ra, a.cl.e.opts.PenaltyCooldown), true
	}
	conc := false
	if class == fallback.ClassRateLimited {
		st.mu.Lock()
		if conc = st.conc.limited(now, st.others(), ra); conc {
			st.learnt.Store(true) // under mu, as headroom clears it
		}
		st.mu.Unlock()
		hasRA = hasRA && !conc // a concurrency limit: no cooldown (concurrency.go)
	}
	if resp.StatusCode == http.StatusTooManyRequests && !conc {
		// x-ratelimit-remaining-* 0 on a concurrency 429 restates the 429:
		// it says nothing about the rate, so it is not read there either.
		st.noteRateLimit(resp.Header, func() time.Time { return now })
	}
	if hasRA {
		st.coolDown(now.Add(ra))
	}
	a.sample = tps.Sample{Start: a.start, Headers: now.Sub(a.start), Total: now.Sub(a.start)}
	a.sampled = true
	a.fail(tps.PhaseHeaders, resp.StatusCode, class, err)
}

// reasonError adds the provider's reason to an *openai.Error's message.
type reasonError struct {
	api    error // *openai.Error
	reason string
}

func (e *reasonError) Error() string { return e.api.Error() + ": " + e.reason }
func (e *reasonError) Unwrap() error { return e.api }

// withReason adds the provider's message to api for the classes whose reason
// the caller needs: policy, invalid and context length.
func withReason(api *openai.Error, class fallback.Class, pe *providerError) error {
	switch class {
	case fallback.ClassPolicy, fallback.ClassInvalid, fallback.ClassContextLength:
		if pe.Message != "" {
			return &reasonError{api, truncate(pe.Message, 200)}
		}
	}
	return api
}

// observe is the tap's observer: it runs inside Read. The times a deadline
// reads (lastOut, lastEvent) are stored before the phase flags, so that the
// timer never pairs a new phase with an old time.
func (a *run) observe(now time.Time, c *payload.Chunk) {
	if a.stopped {
		return // what follows a failing event is never delivered
	}
	el := int64(now.Sub(a.start))
	// Only this goroutine stores these times. The events of one read share
	// its time, so most stores would write the value already there; the
	// store (an exchange, a full barrier) is skipped for them.
	if a.lastEvent.Load() != el {
		a.lastEvent.Store(el)
	}
	switch {
	case c.Done:
		a.sawDone = true
		a.markFinished()
		return
	case c.Error:
		a.errBody = append([]byte{}, c.ErrorBody...)
		if len(a.errBody) == 0 {
			a.errBody = []byte("{}")
		}
		a.stop(c.Start)
		return
	case c.Malformed && c.Unframed: // past Limits.Event: the stream cannot be framed
		a.tooLarge = true
		a.stop(c.Start)
		return
	case c.Malformed:
		a.malformedN++
		if a.cl.malformed == fallback.MalformedFail || a.malformedN >= maxMalformed {
			a.malformed = true
			a.stop(c.Start)
		} else {
			a.cuts = append(a.cuts, span{c.Start, c.End})
		}
		return
	}
	if c.Output {
		a.outputChunk(el, c)
	}
	if c.FinishReason != nil {
		a.finish = true
		a.finishes++
		if a.finishes >= a.cl.choices {
			a.markFinished()
		}
	}
	if a.cl.assemble {
		a.assemble(c)
	}
}

// outputChunk notes an output chunk el ns after the start: the output gap
// for Feedback, the switch from the TTFT to the stall deadline, what kind of
// output it was and, when a continuation may follow, its text.
func (a *run) outputChunk(el int64, c *payload.Chunk) {
	if a.output && a.cl.fb != nil {
		a.cl.fb.OutputGap(a.i, time.Duration(el-a.lastOut.Load()))
	}
	if a.lastOut.Load() != el || !a.output {
		a.lastOut.Store(el)
	}
	if !a.output {
		a.output = true
		a.outputSeen.Store(true)
		a.rearm() // the TTFT deadline ends, the stall deadline starts
	}
	a.toolCalls = a.toolCalls || c.ToolCall
	a.reasoning = a.reasoning || c.Reasoning
	a.multi = a.multi || c.OutputDeltas > 1
	if a.keepText {
		if a.text == nil { // one allocation each for a typical answer
			a.text, a.marks = make([]byte, 0, 1024), make([]mark, 0, 8)
		}
		n := len(a.text)
		a.text = c.AppendText(a.text)
		if m := a.msg; m != nil && m.textHeld != "" && !c.Reasoning && !c.ToolCall {
			// The text as the splice releases it (msgSplice.event).
			var rest string
			rest, m.textHeld = dropHeld(m.textHeld, string(a.text[n:]))
			a.text = append(a.text[:n], rest...)
		}
		a.marks = append(a.marks, mark{end: c.End, n: len(a.text)})
		if a.rescue.slowUnder > 0 {
			a.noteRate(el, len(a.text)-n)
		}
	}
}

// markFinished notes that the answer is complete (a finish_reason for every
// choice, or [DONE]): from now on silence ends the stream as a success after
// the finish grace, and a clean EOF is a clean end.
func (a *run) markFinished() {
	if !a.finished.Load() {
		a.finished.Store(true)
		a.rearm()
	}
}

func (a *run) onSample(s tps.Sample) {
	// An embeddings answer never streams: its TTFT is its latency, which
	// is what routing compares (tps.ProtocolEmbeddings).
	s.Unstreamed = (a.plain || a.plainAnswer != nil) && a.cl.protocol != tps.ProtocolEmbeddings
	a.sample = s
	a.sampled = true
}

// fill reads once from the tap into buf and releases whole events.
func (a *run) fill() error {
	if a.cl.assemble {
		return a.fillAnswer()
	}
	if a.off == a.rel && a.off > 0 { // everything released was read: compact
		n := copy(a.buf, a.buf[a.off:])
		a.buf = a.buf[:n]
		a.rel -= a.off
		a.base += int64(a.off)
		a.off = 0
	}
	if a.bufp == nil {
		a.bufp = a.cl.e.bufs.Get().(*[]byte)
		a.buf = (*a.bufp)[:0]
	}
	if cap(a.buf)-len(a.buf) < 2048 {
		nb := make([]byte, len(a.buf), max(4096, 2*cap(a.buf)))
		copy(nb, a.buf)
		a.buf = nb
	}
	n, err := a.tap.Read(a.buf[len(a.buf):cap(a.buf)])
	if n > 0 && !a.canFailover && !a.output {
		a.lastByte.Store(int64(time.Since(a.start)))
	}
	from := len(a.buf)
	a.buf = a.buf[:from+n]
	for _, c := range a.cuts {
		from = a.excise(c, from)
	}
	a.cuts = a.cuts[:0]
	switch {
	case a.stopped:
		// Release the events before the failing one, never the failing
		// one or anything after it.
		a.release(min(int(a.stopAt-a.base), len(a.buf)))
	case len(a.buf) > from:
		a.release(sse.LastEventEnd(a.buf, max(from-1, a.rel)))
	}
	if len(a.marks) > 0 {
		a.releaseText()
	}
	if err != nil {
		a.readErr = err
	}
	// Whole events held back; the event still arriving is Limits.Event's
	// (the Tap reports it past that), so a large first chunk passes.
	if held := a.rel - a.off; held > a.cl.e.opts.Limits.Held && !a.committed() {
		if !a.cl.stream && held <= a.cl.e.opts.Limits.Answer {
			return err // a non-streaming call holds its whole answer
		}
		a.tooLarge = true
	}
	return err
}

// committed reports whether the run passed its commit point: the first
// output chunk of a streaming call. A non-streaming call commits at its end,
// after its last fill.
func (a *run) committed() bool { return a.cl.stream && a.output }

// release releases buf[rel:to], whole events, with lone-CR line ends made
// LF (loneCRToLF), spliced when the run continues a Messages stream
// (msgSplice.pass) and scrubbed of the deployment's credentials
// (scrubEvents). A rewritten event changes length; base moves by
// the difference, so body offsets past it (stopAt, marks, the tap's next
// events) still map to the same bytes.
func (a *run) release(to int) {
	if to <= a.rel {
		return
	}
	loneCRToLF(a.buf[a.rel:to])
	if a.msg != nil {
		if out, changed := a.msg.pass(a.buf[a.rel:to]); changed {
			to = a.replace(to, out)
		}
	}
	if clean, changed := scrubEvents(a.sc, a.buf[a.rel:to]); changed {
		to = a.replace(to, clean)
	}
	a.rel = to
}

// replace puts b in place of buf[rel:to] and returns where it ends.
func (a *run) replace(to int, b []byte) int {
	d := len(b) - (to - a.rel)
	a.buf = slices.Replace(a.buf, a.rel, to, b...)
	a.base -= int64(d)
	return to + d
}

// span is a range of body offsets.
type span struct{ start, end int64 }

// mark says that text was n bytes long once the event ending at body offset
// end was read.
type mark struct {
	end int64
	n   int
}

// stop notes a failing event that begins at body offset at.
func (a *run) stop(at int64) {
	a.stopped = true
	a.stopAt = at
}

// excise removes the skipped event c from the unreleased part of buf and
// returns from (the index where this fill's bytes begin) adjusted for it.
func (a *run) excise(c span, from int) int {
	s := max(int(c.start-a.base), a.off)
	e := min(int(c.end-a.base), len(a.buf))
	if e <= s {
		return from
	}
	a.buf = append(a.buf[:s], a.buf[e:]...)
	a.base += int64(e - s)
	a.rel = min(a.rel, s)
	return min(from, s)
}

// releaseText advances relText over the output events now released.
func (a *run) releaseText() {
	r := a.base + int64(a.rel)
	i := 0
	for i < len(a.marks) && a.marks[i].end <= r {
		a.relText = a.marks[i].n
		i++
	}
	a.marks = a.marks[:copy(a.marks, a.marks[i:])]
}

// releaseBuf returns the read buffer to the Executor's pool once no byte of it
// can be read any more.
func (a *run) releaseBuf() {
	if a.bufp == nil {
		return
	}
	if cap(a.buf) <= 64<<10 {
		*a.bufp = a.buf[:0]
		if a.cl.assemble {
			a.cl.e.reads.Put(a.bufp)
		} else {
			a.cl.e.bufs.Put(a.bufp)
		}
	}
	a.bufp, a.buf, a.off, a.rel = nil, nil, 0, 0
}

// succeed finalizes a successful run and records it.
func (a *run) succeed() {
	if a.finalized {
		return
	}
	a.att = fallback.Attempt{Key: a.d.Key(), Status: a.resp.StatusCode, Class: fallback.ClassNone, Waited: a.waited}
	a.finalize(nil)
	a.cl.recordRun(a.att, &a.sample, a.fb)
}

// fail finalizes a failed run and records it.
func (a *run) fail(phase tps.Phase, status int, class fallback.Class, err error) {
	a.att = fallback.Attempt{Key: a.d.Key(), Phase: phase, Status: status, Class: class, Err: err, Waited: a.waited, Rescued: a.rescue.rescued}
	a.finalize(err)
	a.releaseBuf()
	a.cl.recordRun(a.att, &a.sample, a.fb)
}

// finalize ends the run exactly once: timers, upstream, breaker (and
// Hooks.Shared), limiters, the sample. err nil means success. The call's
// Feedback handle follows in recordRun, once the attempt is recorded.
func (a *run) finalize(err error) {
	if a.finalized {
		return
	}
	a.finalized = true
	a.tmu.Lock()
	a.timersOff = true
	if a.timer != nil {
		a.timer.Stop()
		a.firesAt = 0
	}
	a.tmu.Unlock()
	if err != nil {
		a.cancel(fallback.ErrClosed)
	}
	if a.tap != nil {
		a.tap.Close()
	}
	a.cancel(nil)
	now := time.Now()
	a.settle(err)
	s := a.finishSample(err, now)
	a.st.correct(now, a.cl.est, s.InputTokens+s.OutputTokens)
	a.att.Duration = now.Sub(a.start)
	a.att.Tokens = s.OutputTokens
}

// settle gives the attempt's outcome to its deployment's health: the breaker
// (and, through done, Hooks.Shared) and the limiters' in-flight slot.
func (a *run) settle(err error) {
	st := a.st
	if err == nil {
		a.done(nil)
		st.mu.Lock()
		st.limited = 0
		st.mu.Unlock()
	} else {
		class := a.att.Class
		if class == fallback.ClassAuth {
			st.forceTrip.Store(true)
		}
		a.done(&classified{class})
		if class == fallback.ClassAuth {
			st.forceTrip.Store(false)
		}
	}
	st.release()
}

// finishSample completes the attempt's sample at now with its outcome err
// and returns it.
func (a *run) finishSample(err error, now time.Time) *tps.Sample {
	if !a.sampled {
		a.sample = tps.Sample{Start: a.start, Total: now.Sub(a.start)}
	}
	s := &a.sample
	if err == nil && a.quiet && s.End == tps.EndError {
		// The tap saw the read that our own deadline cancelled, after the
		// answer was complete: not a failure, and the stream ended with its
		// last data event, not one grace later.
		s.Err, s.ErrPhase = nil, tps.PhaseNone
		s.End = tps.EndEOF
		if a.sawDone {
			s.End = tps.EndDone
		}
		s.Truncated = s.FinishReason == ""
		s.Total = time.Duration(a.lastEvent.Load())
	}
	if err != nil {
		s.Err = err
		if s.ErrPhase == tps.PhaseNone || a.att.Phase > s.ErrPhase {
			s.ErrPhase = a.att.Phase
		}
		if a.att.Phase == tps.PhaseConnect {
			s.ErrPhase = tps.PhaseConnect
		}
	}
	return s
}
