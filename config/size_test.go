package config

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute"
	"github.com/tpsroute/tpsroute/internal/jsoncheck"
)

// largeConfig is a valid config of about size bytes: one deployment whose
// headers hold many short entries, one per line.
func largeConfig(size int) []byte {
	var b strings.Builder
	b.WriteString(`{"deployments":[{"provider":"a","model":"m","base_url":"http://127.0.0.1:1/v1","headers":{`)
	for i := 0; b.Len() < size; i++ {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString("\n\"X-H" + strconv.Itoa(i) + `":"v"`)
	}
	b.WriteString("}}]}")
	return []byte(b.String())
}

// TestParseLookupNested: a config file of megabytes of nested brackets is
// refused at the first level past 128, with its line, without walking the
// rest (the key walker recursed once per level and built a path per level:
// 8 MiB of them ran for minutes).
func TestParseLookupNested(t *testing.T) {
	for _, open := range []string{"[", `{"deployments":[`, "{\"deployments\":\n["} {
		data := bytes.Repeat([]byte(open), (8<<20)/len(open))
		_, err := ParseLookup(bytes.NewReader(data), nil)
		var ce *tpsroute.ConfigError
		require.True(t, errors.As(err, &ce), "%v", err)
		assert.Contains(t, ce.Msg, "deeper than 128 levels")
		var je *jsoncheck.Error
		require.ErrorAs(t, jsoncheck.Valid(data), &je)
		assert.Equal(t, 1+bytes.Count(data[:je.Offset], []byte("\n")), ce.Line)
		assert.Less(t, je.Offset, 4096, "found at the start")
	}
}

// BenchmarkParseLookupLarge parses configs of 64 KiB to 4 MiB, reporting
// the time per byte: the key walker looked up each value's line by counting
// the newlines before it, so the time per byte grew with the size.
func BenchmarkParseLookupLarge(b *testing.B) {
	for _, size := range []int{64 << 10, 512 << 10, 4 << 20} {
		data := largeConfig(size)
		b.Run("bytes="+strconv.Itoa(size), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ParseLookup(bytes.NewReader(data), nil); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(data)), "ns/byte")
		})
	}
}
