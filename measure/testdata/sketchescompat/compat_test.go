package sketchescompat

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/DataDog/sketches-go/ddsketch"
	enc "github.com/DataDog/sketches-go/ddsketch/encoding"
	"github.com/DataDog/sketches-go/ddsketch/store"

	"github.com/tpsroute/tpsroute/internal/registry"
)

// subSketches splits an internal/registry Window encoding (see Window.MarshalBinary)
// into its sub-window sketches, keyed by epoch, with each one's count.
func subSketches(t *testing.T, data []byte) (map[int64][]byte, map[int64]uint64) {
	t.Helper()
	const magic = "TPSW\x01"
	if string(data[:len(magic)]) != magic {
		t.Fatalf("bad magic %q", data[:len(magic)])
	}
	b := data[len(magic):]
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	_, err := enc.DecodeUvarint64(&b) // length
	must(err)
	_, err = enc.DecodeUvarint64(&b) // buckets
	must(err)
	_, err = enc.DecodeFloat64LE(&b) // relative accuracy
	must(err)
	_, err = enc.DecodeUvarint64(&b) // max bins
	must(err)
	n, err := enc.DecodeUvarint64(&b)
	must(err)
	sketches, counts := map[int64][]byte{}, map[int64]uint64{}
	for range n {
		epoch, err := enc.DecodeVarint64(&b)
		must(err)
		cnt, err := enc.DecodeUvarint64(&b)
		must(err)
		_, err = enc.DecodeFloat64LE(&b) // sum
		must(err)
		l, err := enc.DecodeUvarint64(&b)
		must(err)
		sketches[epoch], counts[epoch] = b[:l], cnt
		b = b[l:]
	}
	if len(b) != 0 {
		t.Fatalf("%d trailing bytes", len(b))
	}
	return sketches, counts
}

// TestSubWindowsDecodeWithSketchesGo encodes windows and decodes every
// sub-window sketch with ddsketch.DecodeDDSketch: the counts must match and
// every quantile, interpolated between whole ranks as the Window does, must
// equal the Window's answer for that sub-window alone.
func TestSubWindowsDecodeWithSketchesGo(t *testing.T) {
	base := time.Unix(1_700_000_000, 0)
	tests := []struct {
		name   string
		values func(r *rand.Rand) float64
	}{
		{"lognormal", func(r *rand.Rand) float64 { return math.Exp(r.NormFloat64()*0.5 - 1) }},
		{"bimodal", func(r *rand.Rand) float64 {
			if r.IntN(2) == 0 {
				return 0.2 * (1 + 0.1*r.NormFloat64())
			}
			return 2 * (1 + 0.1*r.NormFloat64())
		}},
		{"with zeros", func(r *rand.Rand) float64 {
			if r.IntN(4) == 0 {
				return 0
			}
			return 50 + 10*r.Float64()
		}},
		{"wide counts", func(r *rand.Rand) float64 { return 1.5 }}, // one bin past 65535
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, 2))
			var w registry.Window
			width := w.Options().Length / time.Duration(w.Options().Buckets)
			n := 3000
			if tt.name == "wide counts" {
				n = 70000
			}
			// Three sub-windows; each is also added to a window of its own,
			// whose quantiles the decoded sketch must reproduce.
			var single [3]registry.Window
			epochs := map[int64]int{}
			for sub := range 3 {
				at := base.Add(time.Duration(sub) * width)
				epochs[at.UnixNano()/int64(width)] = sub
				for range n {
					v := tt.values(r)
					if !w.Add(at, v) || !single[sub].Add(at, v) {
						t.Fatal("value rejected")
					}
				}
			}
			data, err := w.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			sketches, counts := subSketches(t, data)
			if len(sketches) != 3 {
				t.Fatalf("%d sub-windows encoded, want 3", len(sketches))
			}
			for epoch, sk := range sketches {
				sub, ok := epochs[epoch]
				if !ok {
					t.Fatalf("unexpected epoch %d", epoch)
				}
				got, err := ddsketch.DecodeDDSketch(sk, store.BufferedPaginatedStoreConstructor, nil)
				if err != nil {
					t.Fatalf("epoch %d: sketches-go cannot decode: %v", epoch, err)
				}
				if got.GetCount() != float64(counts[epoch]) || counts[epoch] != uint64(n) {
					t.Errorf("epoch %d: sketches-go count %v, window count %d, added %d", epoch, got.GetCount(), counts[epoch], n)
				}
				if math.Abs(got.RelativeAccuracy()-registry.DefaultRelativeAccuracy) > 1e-12 {
					t.Errorf("epoch %d: relative accuracy %v", epoch, got.RelativeAccuracy())
				}
				at := base.Add(time.Duration(sub) * width)
				for _, q := range []float64{0, 0.01, 0.5, 0.9, 0.95, 0.99, 1} {
					want, ok := single[sub].Quantile(at, q)
					if !ok {
						t.Fatalf("window empty at %v", at)
					}
					// sketches-go reads the bin holding rank q·(n−1); the
					// window interpolates between the two whole ranks
					// around it, so each is read at its middle and the
					// same interpolation applied.
					last := float64(counts[epoch] - 1)
					r := q * last
					k := math.Floor(r)
					v, err := got.GetValueAtQuantile(min((k+0.5)/last, 1))
					if err != nil {
						t.Fatal(err)
					}
					if f := r - k; f > 0 {
						hi, err := got.GetValueAtQuantile(min((k+1.5)/last, 1))
						if err != nil {
							t.Fatal(err)
						}
						v += f * (hi - v)
					}
					if math.Abs(v-want) > 1e-9*math.Abs(want) {
						t.Errorf("epoch %d q=%v: sketches-go %v, window %v", epoch, q, v, want)
					}
				}
			}
		})
	}
}
