package fallback

import (
	"errors"
	"time"

	"github.com/tpsroute/tpsroute/tps"
)

// Default values of RescueOptions' zero fields.
const (
	// DefaultRescueRatio is the share of its deployment's expected TPS
	// under which a committed stream is slow: a quarter. A stream at a
	// quarter of its usual rate takes four times as long to finish; the
	// normal variation of a provider's rate within one answer (batching,
	// long contexts) stays well above it.
	DefaultRescueRatio = 0.25
	// DefaultRescueWindow is how long a stream must stay under the ratio
	// before it is rescued: 3 s, long enough that a pause behind a content
	// filter or a burst of long tokens does not count.
	DefaultRescueWindow = 3 * time.Second
	// DefaultRescueSpeedup is how much faster than the slow stream's rate a
	// target must be expected to be: twice, so that the TTFT the target
	// costs is paid back on any answer with more than a few seconds to go.
	DefaultRescueSpeedup = 2
)

// rescueBytesPerToken is the text that counts as one token when a slow
// stream's rate is measured: OpenAI's rule of thumb for English, so that a
// provider that sends several tokens per chunk is not taken for a slow one.
const rescueBytesPerToken = 4

// ErrRescued marks the attempt whose stream was too slow and was left for a
// continuation on a faster deployment (RescueOptions): its class is
// ClassCanceled, so it counts in no breaker and in no error rate, and
// Attempt.Rescued is true. The caller never sees it.
var ErrRescued = errors.New("fallback: stream too slow, continued on a faster deployment")

// RescueOptions configures the slow-stream rescue. A committed stream whose
// generation rate stays under Ratio times its deployment's expected TPS (the
// plan's figure: route.Candidate.Expected, its p50 by default), and under
// Call.MinTPS when that is set, for Window is continued, from exactly the
// text the caller has read, on a deployment of the same model and revision
// that declares assistant prefill and is expected to be at least Speedup
// times faster than the stream's rate. The slow stream is held, not closed,
// while the target opens: if the target fails before its first output, the
// slow stream goes on and the caller loses nothing. A rate is judged at the
// stream's output chunks, in tokens counted as the larger of its output
// chunks and its text bytes / 4. Only streaming calls whose mid-stream
// policy continues are rescued, at most once per attempt. The zero value is
// on with the Default* settings; a negative Ratio turns it off. It is a
// value, safe to share.
type RescueOptions struct {
	// Ratio is the share of the deployment's expected TPS under which the
	// stream is slow. Zero means DefaultRescueRatio; negative turns the
	// rescue off.
	Ratio float64
	// Window is how long the stream must stay slow. Zero means
	// DefaultRescueWindow.
	Window time.Duration
	// Speedup is how many times the slow stream's rate a target must be
	// expected to generate. Zero means DefaultRescueSpeedup.
	Speedup float64
}

func (r RescueOptions) withDefaults() RescueOptions {
	if r.Ratio == 0 || r.Ratio != r.Ratio {
		r.Ratio = DefaultRescueRatio
	}
	if r.Window <= 0 {
		r.Window = DefaultRescueWindow
	}
	if !(r.Speedup > 0) {
		r.Speedup = DefaultRescueSpeedup
	}
	return r
}

// rescue is a run's slow-stream watch, written by the tap's observer during
// Read: the rate under which the stream is slow and the current window.
type rescue struct {
	slowUnder float64 // tokens/s; 0: not watched
	winStart  int64   // ns since start of the window's beginning
	winChunks int64   // output chunks in the window
	winBytes  int     // text bytes in the window
	slowRate  float64 // the rate of the window that was slow; 0 while none was
	rescued   bool    // left for a faster deployment (Attempt.Rescued)
	tried     bool    // a rescue was tried: no second one
}

// watch returns the rate under which a stream on candidate i is slow, or 0
// when it is not watched: the rescue is off, the call cannot continue, or
// i has no expected TPS or no possible target.
func (cl *call) watch(i int) float64 {
	ro := &cl.e.opts.Rescue
	if ro.Ratio < 0 || !cl.keepText || !cl.stream {
		return 0
	}
	x := &cl.plan[i].Expected
	if !x.TPSOK || !(x.TPS > 0) {
		return 0
	}
	under := ro.Ratio * x.TPS
	if cl.minTPS > 0 {
		under = min(under, cl.minTPS)
	}
	if cl.rescueTarget(i, under) < 0 {
		return 0
	}
	return under
}

// rescueTarget returns the first candidate other than i that could take a
// rescue of a stream at rate: the same model and revision, assistant
// prefill declared and not rejected, within the budgets, and expected to be
// Speedup times faster; -1 when none.
func (cl *call) rescueTarget(i int, rate float64) int {
	from := cl.plan[i].Deployment
	for j := range cl.plan {
		d := cl.plan[j].Deployment
		x := &cl.plan[j].Expected
		if j == i || !d.Capabilities.AssistantPrefill || d.Model != from.Model || d.Revision != from.Revision {
			continue
		}
		if !x.TPSOK || x.TPS < cl.e.opts.Rescue.Speedup*rate || cl.barred(j, d) != NoReason {
			continue
		}
		return j
	}
	return -1
}

// noteRate counts an output chunk that arrived el ns after the start and
// brought n bytes of text into the run's window, and closes the window once
// it spans RescueOptions.Window: slowRate is set when the window's rate was
// under slowUnder.
func (a *run) noteRate(el int64, n int) {
	r := &a.rescue
	if r.winStart == 0 {
		r.winStart = el // the first output chunk opens the first window
		return
	}
	r.winChunks++
	r.winBytes += n
	span := el - r.winStart
	if span < int64(a.cl.e.opts.Rescue.Window) {
		return
	}
	tokens := max(float64(r.winChunks), float64(r.winBytes)/rescueBytesPerToken)
	if rate := tokens / (float64(span) / float64(time.Second)); rate < r.slowUnder {
		r.slowRate = rate
	}
	r.winStart, r.winChunks, r.winBytes = el, 0, 0
}

// rescue opens a continuation of the slow run prev on a faster deployment,
// from the text the caller has read, while prev is held. It returns the
// committed continuation, or nil when there is none (prev then goes on).
func (s *stream) rescue(prev *run) *run {
	cl := prev.cl
	prev.rescue.tried = true
	rate := prev.rescue.slowRate
	prev.rescue.slowRate = 0
	text := prev.sc.Scrub(string(prev.text[:prev.relText]))
	if len(text) == 0 {
		return nil
	}
	body, err := cl.e.opts.Prefill(cl.body, text)
	if err != nil {
		return nil
	}
	for {
		i := cl.rescueTarget(prev.i, rate)
		if i < 0 {
			return nil
		}
		d := cl.plan[i].Deployment
		st := cl.e.state(d)
		done, ok := cl.admit(d.Key(), st, time.Now())
		if !ok {
			cl.slots[i].excluded = true // not again in this call
			continue
		}
		cl.real++
		cl.slots[i].tries++
		a := cl.newRun(i, d, st, done, body, true)
		a.keepText = true
		a.text = append(a.text, text...)
		a.relText = len(a.text)
		s.active.Store(a) // Close aborts the rescue too
		if s.closing.Load() {
			a.cancel(ErrClosed)
		}
		if a.open(true) {
			prev.rescue.rescued = true
			prev.fail(tps.PhaseMidStream, prev.resp.StatusCode, ClassCanceled, ErrRescued)
			return a
		}
		s.active.Store(prev)
		cl.slots[i].excluded = true
		if prefillRejected(a.att) {
			cl.e.noPrefill.Store(d.Key(), struct{}{})
		}
		if a.att.Class == ClassCanceled {
			return nil
		}
	}
}
