package bench

import (
	"cmp"
	"fmt"
	"html"
	"html/template"
	"math"
	"strconv"
	"strings"
)

// Chart is one inline SVG line plot: the plots of the HTML report, and of
// other reports built on this package (the fleet simulator's). It is a
// plain value; SVG only reads it, so it is safe for concurrent reads.
type Chart struct {
	// ID names the chart in the SVG's data-chart attribute.
	ID string
	// Title is drawn above the plot and is the SVG's accessible name.
	Title string
	// XLabel and YLabel label the axes.
	XLabel, YLabel string
	// Series are the lines, in legend order.
	Series []Series
	// YFromZero starts the y axis at 0 (or below, for negative values).
	YFromZero bool
}

// Series is one line of a Chart. A point whose x is NaN breaks the line.
type Series struct {
	ID     string // the series' data-target attribute
	Name   string // the legend
	Color  string // a CSS colour; "" means Palette of the series' index
	Points [][2]float64
	Step   bool // draw as a step function
	Dots   bool // mark the points
}

// add appends s to c's series, unless it has no point.
func (c *Chart) add(s Series) {
	if len(s.Points) > 0 {
		c.Series = append(c.Series, s)
	}
}

// HTML returns SVG as template.HTML, for an html/template page: every text
// in it is escaped.
func (c *Chart) HTML() template.HTML {
	return template.HTML(c.SVG()) // #nosec: SVG escapes every text
}

// Palette returns the report's i-th series colour (Okabe-Ito, colour-blind
// safe), cycling after eight.
func Palette(i int) string {
	p := [...]string{"#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000"}
	return p[i%len(p)]
}

const (
	chartW, chartH                   = 560, 320
	padL, padR, padT, padB           = 64, 16, 36, 48
	plotW, plotH                     = chartW - padL - padR, chartH - padT - padB
	legendRow                        = 16
	maxPointsPerSeries               = 2000
	tickCount                        = 5
	fontStyle                        = `font-family="system-ui,sans-serif" font-size="11"`
	axisColor, gridColor, labelColor = "#333", "#e5e5e5", "#222"
)

// niceTicks returns about n+1 round, evenly spaced tick values, the first
// at or below lo and the last at or above hi.
func niceTicks(lo, hi float64, n int) []float64 {
	if !(hi > lo) {
		hi = lo + 1
	}
	raw := (hi - lo) / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	// Cover [lo, hi] with whole steps, so the axis ends on round numbers.
	first, last := math.Floor(lo/step+1e-9), math.Ceil(hi/step-1e-9)
	out := make([]float64, 0, int(last-first)+1)
	for i := first; i <= last; i++ {
		out = append(out, i*step)
	}
	return out
}

func fmtTick(v float64) string {
	if math.Abs(v) >= 1000 && math.Mod(v, 1000) == 0 {
		return strconv.FormatFloat(v/1000, 'g', -1, 64) + "k"
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

// SVG renders c as a self-contained inline SVG element: every text is
// escaped, and there is no script or external resource.
//
// It is long (about 110 lines) because it writes one SVG element in
// document order (axes, ticks, series, legend); each part is a few lines
// of markup.
func (c *Chart) SVG() string {
	xlo, xhi, ylo, yhi := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	for _, s := range c.Series {
		for _, p := range s.Points {
			if math.IsNaN(p[0]) {
				continue
			}
			xlo, xhi = min(xlo, p[0]), max(xhi, p[0])
			ylo, yhi = min(ylo, p[1]), max(yhi, p[1])
		}
	}
	if math.IsInf(xlo, 0) {
		xlo, xhi, ylo, yhi = 0, 1, 0, 1
	}
	if c.YFromZero {
		ylo = min(0, ylo)
	}
	xt, yt := niceTicks(xlo, xhi, tickCount), niceTicks(ylo, yhi, tickCount)
	xlo, xhi = min(xlo, xt[0]), max(xhi, xt[len(xt)-1])
	ylo, yhi = min(ylo, yt[0]), max(yhi, yt[len(yt)-1])
	if xhi == xlo {
		xhi = xlo + 1
	}
	if yhi == ylo {
		yhi = ylo + 1
	}
	px := func(x float64) float64 { return padL + (x-xlo)/(xhi-xlo)*plotW }
	py := func(y float64) float64 { return padT + plotH - (y-ylo)/(yhi-ylo)*plotH }

	legendH := legendRow * ((len(c.Series) + 1) / 2)
	h := chartH + legendH
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" class="chart" data-chart="%s" viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-label="%s" %s>`,
		html.EscapeString(c.ID), chartW, h, chartW, h, html.EscapeString(c.Title), fontStyle)
	fmt.Fprintf(&b, `<title>%s</title>`, html.EscapeString(c.Title))
	fmt.Fprintf(&b, `<text class="chart-title" x="%d" y="20" font-size="13" font-weight="600" fill="%s">%s</text>`, padL, labelColor, html.EscapeString(c.Title))
	// Grid, ticks and axes.
	b.WriteString(`<g class="grid">`)
	for _, v := range yt {
		fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="%s"/>`, padL, padL+plotW, py(v), py(v), gridColor)
	}
	b.WriteString(`</g>`)
	b.WriteString(`<g class="axis x-axis">`)
	fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="%s"/>`, padL, padL+plotW, padT+plotH, padT+plotH, axisColor)
	for _, v := range xt {
		fmt.Fprintf(&b, `<g class="tick"><line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="%s"/><text x="%.1f" y="%d" text-anchor="middle" fill="%s">%s</text></g>`,
			px(v), px(v), padT+plotH, padT+plotH+5, axisColor, px(v), padT+plotH+18, labelColor, fmtTick(v))
	}
	fmt.Fprintf(&b, `<text class="axis-label" x="%d" y="%d" text-anchor="middle" fill="%s">%s</text>`, padL+plotW/2, padT+plotH+38, labelColor, html.EscapeString(c.XLabel))
	b.WriteString(`</g><g class="axis y-axis">`)
	fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="%s"/>`, padL, padL, padT, padT+plotH, axisColor)
	for _, v := range yt {
		fmt.Fprintf(&b, `<g class="tick"><line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="%s"/><text x="%d" y="%.1f" text-anchor="end" fill="%s">%s</text></g>`,
			padL-5, padL, py(v), py(v), axisColor, padL-8, py(v)+4, labelColor, fmtTick(v))
	}
	fmt.Fprintf(&b, `<text class="axis-label" transform="translate(14 %d) rotate(-90)" text-anchor="middle" fill="%s">%s</text>`, padT+plotH/2, labelColor, html.EscapeString(c.YLabel))
	b.WriteString(`</g>`)
	// Series.
	for i, s := range c.Series {
		color := cmp.Or(s.Color, Palette(i))
		fmt.Fprintf(&b, `<g class="series" data-target="%s">`, html.EscapeString(s.ID))
		pts := s.Points
		if len(pts) > maxPointsPerSeries {
			stride := (len(pts) + maxPointsPerSeries - 1) / maxPointsPerSeries
			var thin [][2]float64
			for i := range pts {
				if i%stride == 0 || math.IsNaN(pts[i][0]) {
					thin = append(thin, pts[i])
				}
			}
			pts = append(thin, pts[len(pts)-1])
		}
		var d strings.Builder
		penUp := true
		for _, p := range pts {
			if math.IsNaN(p[0]) {
				penUp = true // a gap: the next point starts a new subpath
				continue
			}
			switch {
			case penUp:
				penUp = false
				fmt.Fprintf(&d, "M%.1f %.1f", px(p[0]), py(p[1]))
			case s.Step:
				fmt.Fprintf(&d, "H%.1fV%.1f", px(p[0]), py(p[1]))
			default:
				fmt.Fprintf(&d, "L%.1f %.1f", px(p[0]), py(p[1]))
			}
		}
		if len(pts) > 0 {
			fmt.Fprintf(&b, `<path class="line" d="%s" fill="none" stroke="%s" stroke-width="2"/>`, d.String(), color)
		}
		if s.Dots {
			for _, p := range pts {
				if math.IsNaN(p[0]) {
					continue
				}
				fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="2.5" fill="%s"/>`, px(p[0]), py(p[1]), color)
			}
		}
		b.WriteString(`</g>`)
	}
	// Legend.
	b.WriteString(`<g class="legend">`)
	for i, s := range c.Series {
		x := padL + (i%2)*(plotW/2)
		y := chartH + (i/2)*legendRow
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="14" height="4" fill="%s"/><text x="%d" y="%d" fill="%s">%s</text>`,
			x, y-4, cmp.Or(s.Color, Palette(i)), x+20, y+1, labelColor, html.EscapeString(s.Name))
	}
	b.WriteString(`</g></svg>`)
	return b.String()
}
