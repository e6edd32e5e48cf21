package registry

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/tps"
)

// LiveTPS reads the running calls' recent chunk gaps at the key's tokens
// per gap: nothing before a finished sample with gaps or before three gaps,
// then the recent speed, which follows a slowdown within a few chunks, and
// nothing once the call ended.
func TestLiveTPS(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	k := measure.Key{Provider: "a", Model: "m"}
	r := New(measure.Options{})
	f := r.BeginFlightAt(t0, k, 200)
	h := r.Handle(k)
	require.NotNil(t, h)
	for range 3 {
		f.Gap(100 * time.Millisecond)
	}
	v, n := LiveTPS(h)
	assert.Zero(t, n, "no tokens per gap before a finished sample")
	assert.Zero(t, v)

	// A finished sample: 100 tok/s over 0.9 s of 9 gaps, 10 tokens a gap.
	r.RecordAt(t0, k, tps.Sample{Start: t0, TTFT: 100 * time.Millisecond, TPS: 100, TPSOK: true, OutputTokens: 100,
		Gaps: tps.GapStats{Count: 9, Sum: 900 * time.Millisecond}})
	v, n = LiveTPS(h)
	assert.Equal(t, 1, n)
	assert.InDelta(t, 100, v, 1e-9, "10 tokens per 0.1 s gap")

	g := r.BeginFlightAt(t0, k, 200)
	g.Gap(time.Second)
	g.Gap(time.Second)
	_, n = LiveTPS(h)
	assert.Equal(t, 1, n, "a call with two gaps does not count yet")
	g.Gap(time.Second)
	v, n = LiveTPS(h)
	assert.Equal(t, 2, n)
	assert.InDelta(t, 100, v, 1e-9, "the fastest of the calls' speeds")
	g.End()

	// The stream slows to 0.4 s a gap: its recent gap follows within a few.
	for range 12 {
		f.Gap(400 * time.Millisecond)
	}
	v, _ = LiveTPS(h)
	assert.InDelta(t, 25, v, 1.5)
	f.End()
	f.End() // idempotent
	_, n = LiveTPS(h)
	assert.Zero(t, n, "an ended call no longer counts")

	// A reused slot starts over; a call without a cap is not tracked; the
	// zero Flight does nothing.
	f2 := r.BeginFlightAt(t0, k, 200)
	_, n = LiveTPS(h)
	assert.Zero(t, n)
	f3 := r.BeginFlightAt(t0, k, 0)
	for range 5 {
		f3.Gap(time.Millisecond)
	}
	_, n = LiveTPS(h)
	assert.Zero(t, n)
	f2.End()
	f3.End()
	var z Flight
	z.Gap(time.Second)
	z.End()
	v, n = LiveTPS(nil)
	assert.Zero(t, v+float64(n))
}
