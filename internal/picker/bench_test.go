package picker

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tpsroute/tpsroute/internal/cputime"
	"github.com/tpsroute/tpsroute/internal/registry"
	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/route"
	"github.com/tpsroute/tpsroute/tps"
)

func benchPick(b *testing.B, n int, req route.Request, health Health) {
	ds, src := spread(n)
	p := newPicker(b, ds, src, route.Options{Seed: 1}, health)
	if _, err := p.PickAt(req, t0); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	defer cputime.PerOp(b)()
	for b.Loop() {
		if _, err := p.PickAt(req, t0); err != nil {
			b.Fatal(err)
		}
	}
}

func benchPicker(b *testing.B, p *Picker, req route.Request) {
	if _, err := p.PickAt(req, t0); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	defer cputime.PerOp(b)()
	for b.Loop() {
		if _, err := p.PickAt(req, t0); err != nil {
			b.Fatal(err)
		}
	}
}

// benchRegistry benchmarks Pick over spreadRegistry(n, unordered).
func benchRegistry(n int, unordered bool) func(*testing.B) {
	return func(b *testing.B) {
		ds, reg := spreadRegistry(n, unordered)
		benchPicker(b, newPicker(b, ds, reg, route.Options{Seed: 1}), route.Request{Model: "m"})
	}
}

func BenchmarkPick(b *testing.B) {
	b.Run("deployments=16", func(b *testing.B) { benchPick(b, 16, route.Request{Model: "m"}, nil) })
	b.Run("deployments=16/health+slo+cachekey", func(b *testing.B) {
		h := fakeHealth{}
		benchPick(b, 16, route.Request{Model: "m", CacheKey: "session-1", SLO: route.SLO{MinTPS: 100}, Regions: []string{"us"}}, h)
	})
	b.Run("deployments=16/estimate-only", func(b *testing.B) {
		ds, src := spread(16)
		benchPicker(b, newPicker(b, ds, estimateOnly{src}, route.Options{Seed: 1}), route.Request{Model: "m"})
	})
	b.Run("deployments=16/registry", benchRegistry(16, false))
	b.Run("deployments=16/registry/unordered", benchRegistry(16, true))
	// The registry with a load model and a warm prompt-size class on every
	// deployment, calls in flight with an output cap, and a request of
	// known prompt size: every step of shape runs, and overdue reads the
	// calls in flight.
	b.Run("deployments=16/registry+load+classes", func(b *testing.B) {
		ds, _ := spread(16)
		reg := registry.New(measure.Options{MinSamples: 1})
		for i := range ds {
			for j := range 40 {
				start := t0.Add(time.Duration(j-40) * time.Second)
				reg.BeginCallAt(start, ds[i].Key(), 200) // never ended: the load grows
				reg.RecordAt(start.Add(time.Second), ds[i].Key(), tps.Sample{
					Start: start, TTFT: 100 * time.Millisecond, Last: time.Second, Total: time.Second,
					TPS: 1000 / float64(i+1) / (1 + float64(j)/4), TPSOK: true, OutputTokens: 200, InputTokens: 300,
				})
			}
			if est, _ := reg.Estimate(ds[i].Key()); !(est.LoadK > 0) {
				b.Fatalf("no load model: %+v", est)
			}
		}
		benchPicker(b, newPicker(b, ds, reg, route.Options{Seed: 1}), route.Request{Model: "m", ExpectedInputTokens: 300})
	})
	// The same with live speed: samples with chunk gaps and four calls in
	// flight per deployment that have shown their gaps (registry.LiveTPS),
	// so that live reads them on every pick.
	b.Run("deployments=16/registry+load+classes+live", func(b *testing.B) {
		ds, _ := spread(16)
		reg := registry.New(measure.Options{MinSamples: 1})
		for i := range ds {
			for j := range 40 {
				start := t0.Add(time.Duration(j-40) * time.Second)
				f := reg.BeginFlightAt(start, ds[i].Key(), 200) // never ended: the load grows
				for range 4 {
					f.Gap(20 * time.Millisecond)
				}
				reg.RecordAt(start.Add(time.Second), ds[i].Key(), tps.Sample{
					Start: start, TTFT: 100 * time.Millisecond, Last: time.Second, Total: time.Second,
					TPS: 1000 / float64(i+1) / (1 + float64(j)/4), TPSOK: true, OutputTokens: 200, InputTokens: 300,
					Gaps: tps.GapStats{Count: 9, Sum: 900 * time.Millisecond},
				})
			}
			if _, n := registry.LiveTPS(reg.Handle(ds[i].Key())); n == 0 {
				b.Fatal("no live speed")
			}
		}
		benchPicker(b, newPicker(b, ds, reg, route.Options{Seed: 1}), route.Request{Model: "m", ExpectedInputTokens: 300})
	})
	b.Run("deployments=256", func(b *testing.B) { benchPick(b, 256, route.Request{Model: "m"}, nil) })
	b.Run("deployments=256/registry", benchRegistry(256, false))
	b.Run("deployments=256/registry/unordered", benchRegistry(256, true))
	b.Run("deployments=256/estimate-only", func(b *testing.B) {
		ds, src := spread(256)
		benchPicker(b, newPicker(b, ds, estimateOnly{src}, route.Options{Seed: 1}), route.Request{Model: "m"})
	})
	b.Run("deployments=256/models=16", func(b *testing.B) {
		ds, src := spread(256)
		for i := range ds {
			ds[i].Model = fmt.Sprintf("m%d", i%16)
			src.set(ds[i].Key(), warm(0.1+float64(i)*0.01, 1000/float64(i+1)))
		}
		p := newPicker(b, ds, src, route.Options{Seed: 1})
		b.ReportAllocs()
		for b.Loop() {
			if _, err := p.PickAt(route.Request{Model: "m3"}, t0); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// spreadRegistry is spread's fleet on a registry.Registry, each deployment
// with five samples: the slower the later in the configuration, or, when
// unordered, in a seeded random order (as a real fleet's speeds are, which
// the sort then has to put in order).
func spreadRegistry(n int, unordered bool) ([]route.Deployment, *registry.Registry) {
	ds, _ := spread(n)
	speed := make([]int, n)
	for i := range speed {
		speed[i] = i
	}
	if unordered {
		speed = rand.New(rand.NewPCG(1, 2)).Perm(n)
	}
	reg := registry.New(measure.Options{MinSamples: 1})
	for i := range ds {
		r := speed[i]
		for j := range 5 {
			reg.RecordAt(t0.Add(time.Duration(j)*time.Second), ds[i].Key(),
				sample(time.Duration(100+10*r)*time.Millisecond, 1000/float64(r+1)))
		}
	}
	return ds, reg
}

func BenchmarkPickParallel(b *testing.B) {
	ds, src := spread(16)
	p := newPicker(b, ds, src, route.Options{Seed: 1})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := p.PickAt(route.Request{Model: "m"}, t0); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
