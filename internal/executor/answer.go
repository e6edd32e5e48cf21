package executor

import (
	"time"

	"github.com/tpsroute/tpsroute/internal/answer"
	"github.com/tpsroute/tpsroute/internal/payload"
	"github.com/tpsroute/tpsroute/tps"
)

// This file is the assembled answer of a non-streaming call with
// Call.Assemble: the run folds each chunk into a answer.Accumulator as the tap
// scans it (assemble, from observe), reads the stream through a scratch
// buffer that holds nothing (fillAnswer), and once the stream has ended
// cleanly puts the chat.completion, scrubbed of the deployment's
// credentials, where the stream's released bytes would be (answer), for
// the Result's Body to read.

// answerRead is the size of the scratch buffer an assembling run reads its
// stream through: large reads, since none of it is kept.
const answerRead = 32 << 10

// assemble folds the chunk c, which observe found to be neither an error
// nor malformed, into the answer, and fails the run with ErrTooLarge once
// the answer would pass Limits.Answer. A Responses call keeps the response
// object its final event carries, the whole answer, and nothing of the
// events before it (answer fails a stream that ends without one); the
// stream's own bound, Limits.Answer in fillAnswer, bounds that object too.
func (a *run) assemble(c *payload.Chunk) {
	if a.cl.protocol == tps.ProtocolResponses {
		if c.Answer != nil {
			a.final = append(a.final[:0], c.Answer...)
		}
		return
	}
	a.acc.AddChunk(c)
	if a.acc.Size() > a.cl.e.opts.Limits.Answer {
		a.tooLarge = true
		a.stop(c.Start)
	}
}

// fillAnswer is fill for an assembling run: it reads once from the tap,
// whose observer assembles the answer, and keeps none of the bytes.
func (a *run) fillAnswer() error {
	if a.bufp == nil {
		a.takeReadBuf()
	}
	n, err := a.tap.Read(a.buf[:cap(a.buf)])
	if n > 0 && !a.canFailover && !a.output {
		a.lastByte.Store(int64(time.Since(a.start)))
	}
	a.base += int64(n)
	a.cuts = a.cuts[:0] // skipped malformed events were never assembled
	if err != nil {
		a.readErr = err
	}
	// The stream is bounded as if it were held, as a buffered call's is:
	// comments or empty chunks do not go on for ever.
	if a.base > int64(a.cl.e.opts.Limits.Answer) {
		a.tooLarge = true
	}
	return err
}

// answer builds the answer of a stream that ended cleanly into the run's
// buffer, as released bytes for the Result's Body: the chat.completion, or
// a Responses call's response object. A string that holds a credential of
// the deployment in any form reads route.Redacted, as in a released stream
// (scrubEvents), and a credential split across chunks is found in the
// joined text. It reports false, with nothing built, for a Responses
// stream that ended without a final event carrying its response object.
func (a *run) answer() bool {
	var b []byte
	switch {
	case a.plainAnswer != nil: // the provider's own answer, every field as sent
		b = append(a.buf[:0], a.plainAnswer...)
	case a.acc != nil:
		b = a.acc.AppendJSON(a.buf[:0])
	case a.final != nil:
		b, a.final = append(a.buf[:0], a.final...), nil
	default:
		return false
	}
	if a.sc.Contains(b) {
		b = a.sc.ScrubJSON(b)
	}
	a.releaseAccumulator()
	a.buf, a.off, a.rel = b, 0, len(b)
	return true
}

// maxPooledAnswer is the largest answer (Accumulator.Size) whose
// Accumulator goes back to the pool: an outsized one's buffers are dropped
// rather than kept for ever.
const maxPooledAnswer = 64 << 10

// takeAccumulator gives an assembling run an empty Accumulator from the
// Executor's pool, whose buffers have grown on earlier answers: a chunk's
// text is then copied without the growth of the text buffers, about 17 KB
// of garbage for a 1,000-token answer.
func (a *run) takeAccumulator() {
	if acc, _ := a.cl.e.accs.Get().(*answer.Accumulator); acc != nil {
		a.acc = acc
		return
	}
	a.acc = new(answer.Accumulator)
}

// releaseAccumulator returns the run's Accumulator, which no chunk can reach
// any more (the stream has ended), to the pool.
func (a *run) releaseAccumulator() {
	if acc := a.acc; acc != nil && acc.Size() <= maxPooledAnswer {
		acc.Reset()
		a.cl.e.accs.Put(acc)
	}
	a.acc = nil
}

// takeReadBuf takes an assembling run's buffer from the Executor's pool
// (releaseBuf gives it back): answerRead bytes or more.
func (a *run) takeReadBuf() {
	a.bufp = a.cl.e.reads.Get().(*[]byte)
	if cap(*a.bufp) < answerRead {
		*a.bufp = make([]byte, 0, answerRead)
	}
	a.buf = (*a.bufp)[:0]
}
