package executor

import (
	"time"

	"github.com/tpsroute/tpsroute/fallback"

	"github.com/tpsroute/tpsroute/tps"
)

// rescueDefaults returns r with each zero field set to its default.
func rescueDefaults(r fallback.RescueOptions) fallback.RescueOptions {
	if r.Ratio == 0 || r.Ratio != r.Ratio {
		r.Ratio = defaultRescueRatio
	}
	if r.Window <= 0 {
		r.Window = defaultRescueWindow
	}
	if !(r.Speedup > 0) {
		r.Speedup = defaultRescueSpeedup
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
		if !x.TPSOK || x.TPS < cl.e.opts.Rescue.Speedup*rate || cl.barred(j, d) != fallback.NoReason {
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
	if cl.unsupported(prev) != fallback.NoReason {
		return nil
	}
	text, body, sp, why := cl.prefill(prev)
	if why != fallback.NoReason {
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
		a.keepText, a.msg = true, sp.fresh() // one splice per target
		a.text = append(a.text, text...)
		a.relText = len(a.text)
		s.active.Store(a) // Close aborts the rescue too
		if s.closing.Load() {
			a.cancel(fallback.ErrClosed)
		}
		if a.open(true) {
			prev.rescue.rescued = true
			prev.fail(tps.PhaseMidStream, prev.resp.StatusCode, fallback.ClassCanceled, fallback.ErrRescued)
			return a
		}
		s.active.Store(prev)
		cl.slots[i].excluded = true
		if prefillRejected(a.att) {
			cl.e.noPrefill.Store(d.Key(), struct{}{})
		}
		if a.att.Class == fallback.ClassCanceled {
			return nil
		}
	}
}
