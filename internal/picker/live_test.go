package picker

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/internal/registry"
	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/route"
	"github.com/tpsroute/tpsroute/tps"
)

// live lowers the call TPS to the speed the fastest of two or more running
// streams gets when that is lower, and leaves it alone when it is higher,
// unknown or shown by one stream only.
func TestLiveLowersCallTPS(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	k := measure.Key{Provider: "a", Model: "m"}
	reg := registry.New(measure.Options{})
	// 10 tokens per chunk gap.
	reg.RecordAt(t0, k, tps.Sample{Start: t0, TTFT: 100 * time.Millisecond, TPS: 100, TPSOK: true, OutputTokens: 100,
		Gaps: tps.GapStats{Count: 9, Sum: 900 * time.Millisecond}})
	h := reg.Handle(k)
	require.NotNil(t, h)
	for _, tc := range []struct {
		name string
		gaps []time.Duration // the running streams' gaps
		want float64
	}{
		{"no stream", nil, 100},
		{"one slower stream, its own noise", []time.Duration{200 * time.Millisecond}, 100},
		{"slower streams", []time.Duration{200 * time.Millisecond, 250 * time.Millisecond}, 50},
		{"one stream still fast", []time.Duration{200 * time.Millisecond, 50 * time.Millisecond}, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, g := range tc.gaps {
				f := reg.BeginFlightAt(t0, k, 100)
				defer f.End()
				for range 4 {
					f.Gap(g)
				}
			}
			x := route.Expected{TPS: 100, TPSOK: true}
			live(&x, h)
			assert.InDelta(t, tc.want, x.CallTPS(), 1e-3)
			assert.Equal(t, 100.0, x.TPS, "the deployment's figure is left alone")
		})
	}
	x := route.Expected{}
	live(&x, h)
	assert.False(t, x.TPSOK)
}
