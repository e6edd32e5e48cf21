package bench

import (
	"bytes"
	"context"
	"encoding/xml"
	"regexp"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/replay"
)

// svgNode is a generic XML element, for walking the report's SVG.
type svgNode struct {
	XMLName xml.Name
	Attrs   []xml.Attr `xml:",any,attr"`
	Nodes   []svgNode  `xml:",any"`
	Text    string     `xml:",chardata"`
}

func (n *svgNode) attr(name string) string {
	for _, a := range n.Attrs {
		if a.Name.Local == name {
			return a.Value
		}
	}
	return ""
}

// find returns the descendants of n (n included) matching pred, in order.
func (n *svgNode) find(pred func(*svgNode) bool) []*svgNode {
	var out []*svgNode
	if pred(n) {
		out = append(out, n)
	}
	for i := range n.Nodes {
		out = append(out, n.Nodes[i].find(pred)...)
	}
	return out
}

func byClass(class string) func(*svgNode) bool {
	return func(n *svgNode) bool { return strings.Contains(" "+n.attr("class")+" ", " "+class+" ") }
}

func byName(name string) func(*svgNode) bool {
	return func(n *svgNode) bool { return n.XMLName.Local == name }
}

// sweepReport runs two targets over two concurrency levels and both cache
// modes in a synctest bubble.
func sweepReport(t *testing.T) *Report {
	var rep *Report
	synctest.Test(t, func(t *testing.T) {
		cfg := Config{
			Router: knownConfig(map[string]*replay.Profile{
				"a": {TTFT: 200 * time.Millisecond, TPS: 50, Jitter: 0.2, OutputTokens: 40, Seed: 1, PromptCache: replay.PromptCache{Enabled: true}},
				"b": {TTFT: 800 * time.Millisecond, TPS: 150, Jitter: 0.2, OutputTokens: 40, Seed: 2, PromptCache: replay.PromptCache{Enabled: true}},
			}),
			Concurrency: []int{1, 4},
			Cache:       []CacheMode{Cold, Warm},
			Requests:    20,
			SLO:         SLO{TTFT: 300 * time.Millisecond},
		}
		var err error
		rep, err = Run(context.Background(), cfg)
		require.NoError(t, err)
	})
	return rep
}

func TestWriteHTMLStructure(t *testing.T) {
	rep := sweepReport(t)
	var buf bytes.Buffer
	require.NoError(t, rep.WriteHTML(&buf))
	page := buf.String()

	t.Run("self-contained", func(t *testing.T) {
		assert.True(t, strings.HasPrefix(page, "<!DOCTYPE html>"))
		assert.NotContains(t, page, "<script")
		assert.NotContains(t, page, "<link")
		for _, m := range regexp.MustCompile(`(?:src|href)="([^"]*)"`).FindAllStringSubmatch(page, -1) {
			t.Errorf("external reference %q", m[1])
		}
	})

	svgs := regexp.MustCompile(`(?s)<svg .*?</svg>`).FindAllString(page, -1)
	charts := map[string]*svgNode{}
	for _, s := range svgs {
		var n svgNode
		require.NoError(t, xml.Unmarshal([]byte(s), &n), "every chart is well-formed SVG")
		charts[n.attr("data-chart")] = &n
	}
	// 4 configurations × 2 CDFs, 2 cache modes × 2 sweep charts, 1 timeline.
	require.Len(t, charts, 4*2+2*2+1)
	targets := rep.Targets
	require.Len(t, targets, 2)

	tests := []struct {
		name      string
		chart     string
		points    int  // points per series; 0 means do not check
		step      bool // CDF step path
		dots      bool
		subpaths  int // one per configuration in the timeline
		xLabelHas string
	}{
		{name: "TTFT CDF cold c=1", chart: "ttft-cdf-0", points: 21, step: true, subpaths: 1, xLabelHas: "TTFT"},
		{name: "TPS CDF warm c=4", chart: "tps-cdf-3", points: 21, step: true, subpaths: 1, xLabelHas: "tokens/s"},
		{name: "TPS sweep cold", chart: "tps-sweep-cold", points: 2, dots: true, subpaths: 1, xLabelHas: "concurrency"},
		{name: "TTFT sweep warm", chart: "ttft-sweep-warm", points: 2, dots: true, subpaths: 1, xLabelHas: "concurrency"},
		{name: "TTFT over the run", chart: "ttft-time", points: 80, dots: true, subpaths: 4, xLabelHas: "time"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, ok := charts[tt.chart]
			require.True(t, ok, "chart %s present", tt.chart)
			for _, axis := range []string{"x-axis", "y-axis"} {
				ax := c.find(byClass(axis))
				require.Len(t, ax, 1, axis)
				assert.NotEmpty(t, ax[0].find(byName("line")), "%s has a line", axis)
				assert.GreaterOrEqual(t, len(ax[0].find(byClass("tick"))), 2, "%s has ticks", axis)
				assert.Len(t, ax[0].find(byClass("axis-label")), 1, "%s has a label", axis)
			}
			assert.Contains(t, c.find(byClass("x-axis"))[0].find(byClass("axis-label"))[0].Text, tt.xLabelHas)
			series := c.find(byClass("series"))
			require.Len(t, series, len(targets), "one series per deployment")
			colors := map[string]bool{}
			for i, s := range series {
				assert.Equal(t, targets[i], s.attr("data-target"))
				paths := s.find(byName("path"))
				require.Len(t, paths, 1)
				d := paths[0].attr("d")
				require.True(t, strings.HasPrefix(d, "M"), "path starts with a move: %q", d)
				colors[paths[0].attr("stroke")] = true
				segs := strings.Count(d, "L") + strings.Count(d, "H")
				moves := strings.Count(d, "M")
				assert.Equal(t, tt.subpaths, moves, "subpaths of %s in %s", targets[i], tt.chart)
				if tt.points > 0 {
					assert.Equal(t, tt.points-moves, segs, "segments of %s in %s", targets[i], tt.chart)
				}
				if tt.step {
					assert.Equal(t, strings.Count(d, "H"), strings.Count(d, "V"), "a CDF is a step function")
				}
				if tt.dots {
					assert.Len(t, s.find(byName("circle")), tt.points)
				}
			}
			assert.Len(t, colors, len(targets), "each deployment has its own colour")
			legend := c.find(byClass("legend"))
			require.Len(t, legend, 1)
			var names []string
			for _, txt := range legend[0].find(byName("text")) {
				names = append(names, txt.Text)
			}
			assert.Equal(t, []string{"a/r1", "b/r1"}, names, "legend names the deployments, without the model")
		})
	}

	t.Run("summary table", func(t *testing.T) {
		assert.Equal(t, 1+len(rep.Summaries), strings.Count(page, "<tr>"), "header and one row per summary")
		assert.Contains(t, page, "SLO ttft=300ms,p=95")
		assert.Contains(t, page, `class="miss"`, "the 800 ms target misses a 300 ms TTFT SLO")
	})
}

func TestChartGeometry(t *testing.T) {
	tests := []struct {
		name   string
		lo, hi float64
		want   []float64
	}{
		{name: "unit", lo: 0, hi: 1, want: []float64{0, 0.2, 0.4, 0.6, 0.8, 1}},
		{name: "ms", lo: 180, hi: 820, want: []float64{0, 200, 400, 600, 800, 1000}},
		{name: "flat", lo: 5, hi: 5, want: []float64{5, 5.2, 5.4, 5.6, 5.8, 6}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := niceTicks(tt.lo, tt.hi, tickCount)
			require.Len(t, got, len(tt.want))
			for i := range got {
				assert.InDelta(t, tt.want[i], got[i], 1e-9)
			}
		})
	}
}
