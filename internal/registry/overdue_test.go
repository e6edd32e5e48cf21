package registry

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/measure"
)

// TestOverdue checks the calls in flight that Overdue reads: begun with
// BeginCallAt and a cap, timed at the caller's figures, freed by their end,
// at most overdueSlots of them.
func TestOverdue(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	k := measure.Key{Provider: "a", Model: "m"}
	r := New(measure.Options{})
	endA := r.BeginCallAt(t0, k, 200)
	h := r.Handle(k)
	require.NotNil(t, h)
	at := func(d time.Duration) float64 { return Overdue(h, t0.Add(d), 0.2, 1000) }

	// At 0.2 s to the first token and 1000 tok/s, 200 tokens take 0.4 s.
	assert.InDelta(t, 2.5, at(time.Second), 1e-9)
	assert.Zero(t, Overdue(h, t0, 0.2, 1000), "no time in flight yet")
	endB := r.BeginCallAt(t0.Add(500*time.Millisecond), k, 1800) // 2 s at these figures
	assert.InDelta(t, 2.5, at(time.Second), 1e-9, "the most overdue call")
	endA()
	assert.InDelta(t, 0.25, at(time.Second), 1e-9, "the other once it ended")
	endB()
	endB() // idempotent
	assert.Zero(t, at(time.Second))

	// Calls begun without a cap are counted in flight but not tracked.
	endC := r.BeginAt(t0, k)
	endD := r.BeginCallAt(t0, k, 0)
	e, _ := r.Estimate(k)
	assert.EqualValues(t, 2, e.InFlight)
	assert.Zero(t, at(time.Second))
	endC()
	endD()

	// Figures that give no time give no ratio.
	r.BeginCallAt(t0, k, 100)
	for _, f := range [][2]float64{{0.2, 0}, {0.2, -1}, {math.NaN(), 100}, {0.2, math.Inf(1)}, {math.Inf(1), 100}, {-1, 100}} {
		assert.Zero(t, Overdue(h, t0.Add(time.Second), f[0], f[1]), "ttft %v tps %v", f[0], f[1])
	}
	assert.Zero(t, Overdue(fixedHandle{}, t0.Add(time.Second), 0.2, 1000), "a handle not from a Registry")
	assert.Zero(t, Overdue(nil, t0.Add(time.Second), 0.2, 1000))
}

// TestOverdueSlots checks that the first overdueSlots calls in flight are
// tracked and a later one takes a slot only once one is free.
func TestOverdueSlots(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	k := measure.Key{Provider: "a", Model: "m"}
	r := New(measure.Options{})
	var ends []func()
	for i := range overdueSlots {
		ends = append(ends, r.BeginCallAt(t0.Add(time.Duration(i)*time.Second), k, 100))
	}
	late := r.BeginCallAt(t0.Add(-time.Hour), k, 100) // older than all, but no slot is free
	h := r.Handle(k)
	for _, end := range ends {
		end()
	}
	assert.Zero(t, Overdue(h, t0.Add(time.Minute), 0.1, 1000), "the call begun with every slot taken is not tracked")
	e, _ := r.Estimate(k)
	assert.EqualValues(t, 1, e.InFlight)
	late()
	end := r.BeginCallAt(t0, k, 100)
	assert.InDelta(t, 60/0.2, Overdue(h, t0.Add(time.Minute), 0.1, 1000), 1e-9, "a freed slot is taken again")
	end()
}

// fixedHandle is an EstimateHandle that is not a Registry's.
type fixedHandle struct{}

func (fixedHandle) Estimate() (Estimate, bool) { return Estimate{}, false }
func (fixedHandle) Live() bool                 { return true }

func BenchmarkOverdue(b *testing.B) {
	t0 := time.Unix(1_700_000_000, 0)
	k := measure.Key{Provider: "a", Model: "m"}
	r := New(measure.Options{})
	for i := range 3 {
		defer r.BeginCallAt(t0.Add(time.Duration(i)*time.Second), k, 200)()
	}
	h := r.Handle(k)
	now := t0.Add(5 * time.Second)
	b.ReportAllocs()
	for b.Loop() {
		if Overdue(h, now, 0.2, 1000) == 0 {
			b.Fatal("no ratio")
		}
	}
}
