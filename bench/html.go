package bench

import (
	"cmp"
	"fmt"
	"html"
	"html/template"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// palette colours the targets, in Targets order (colour-blind safe, Okabe-Ito).
func palette(i int) string {
	p := [...]string{"#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000"}
	return p[i%len(p)]
}

// series is one target's line on a chart.
type series struct {
	id     string // the target, as in Report.Targets
	name   string // the legend
	color  string
	points [][2]float64
	step   bool // draw as a step function (CDF)
	dots   bool // mark the points
}

// chart is one SVG plot.
type chart struct {
	id, title      string
	xLabel, yLabel string
	series         []series
	yMin0          bool // y axis starts at 0
}

// add appends s to c's series, unless it has no point.
func (c *chart) add(s series) {
	if len(s.points) > 0 {
		c.series = append(c.series, s)
	}
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

// svg renders c as an inline SVG element.
//
// It is long (about 110 lines) because it writes one SVG element in
// document order (axes, ticks, series, legend); each part is a few lines
// of markup.
func (c *chart) svg() string {
	xlo, xhi, ylo, yhi := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	for _, s := range c.series {
		for _, p := range s.points {
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
	if c.yMin0 {
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

	legendH := legendRow * ((len(c.series) + 1) / 2)
	h := chartH + legendH
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" class="chart" data-chart="%s" viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-label="%s" %s>`,
		html.EscapeString(c.id), chartW, h, chartW, h, html.EscapeString(c.title), fontStyle)
	fmt.Fprintf(&b, `<title>%s</title>`, html.EscapeString(c.title))
	fmt.Fprintf(&b, `<text class="chart-title" x="%d" y="20" font-size="13" font-weight="600" fill="%s">%s</text>`, padL, labelColor, html.EscapeString(c.title))
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
	fmt.Fprintf(&b, `<text class="axis-label" x="%d" y="%d" text-anchor="middle" fill="%s">%s</text>`, padL+plotW/2, padT+plotH+38, labelColor, html.EscapeString(c.xLabel))
	b.WriteString(`</g><g class="axis y-axis">`)
	fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="%s"/>`, padL, padL, padT, padT+plotH, axisColor)
	for _, v := range yt {
		fmt.Fprintf(&b, `<g class="tick"><line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="%s"/><text x="%d" y="%.1f" text-anchor="end" fill="%s">%s</text></g>`,
			padL-5, padL, py(v), py(v), axisColor, padL-8, py(v)+4, labelColor, fmtTick(v))
	}
	fmt.Fprintf(&b, `<text class="axis-label" transform="translate(14 %d) rotate(-90)" text-anchor="middle" fill="%s">%s</text>`, padT+plotH/2, labelColor, html.EscapeString(c.yLabel))
	b.WriteString(`</g>`)
	// Series.
	for _, s := range c.series {
		fmt.Fprintf(&b, `<g class="series" data-target="%s">`, html.EscapeString(s.id))
		pts := s.points
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
			case s.step:
				fmt.Fprintf(&d, "H%.1fV%.1f", px(p[0]), py(p[1]))
			default:
				fmt.Fprintf(&d, "L%.1f %.1f", px(p[0]), py(p[1]))
			}
		}
		if len(pts) > 0 {
			fmt.Fprintf(&b, `<path class="line" d="%s" fill="none" stroke="%s" stroke-width="2"/>`, d.String(), s.color)
		}
		if s.dots {
			for _, p := range pts {
				if math.IsNaN(p[0]) {
					continue
				}
				fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="2.5" fill="%s"/>`, px(p[0]), py(p[1]), s.color)
			}
		}
		b.WriteString(`</g>`)
	}
	// Legend.
	b.WriteString(`<g class="legend">`)
	for i, s := range c.series {
		x := padL + (i%2)*(plotW/2)
		y := chartH + (i/2)*legendRow
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="14" height="4" fill="%s"/><text x="%d" y="%d" fill="%s">%s</text>`,
			x, y-4, s.color, x+20, y+1, labelColor, html.EscapeString(s.name))
	}
	b.WriteString(`</g></svg>`)
	return b.String()
}

// cdf returns the empirical CDF points of values: (v, share <= v), in percent.
func cdf(values []float64) [][2]float64 {
	v := slices.Clone(values)
	slices.Sort(v)
	out := make([][2]float64, 0, len(v)+1)
	if len(v) > 0 {
		out = append(out, [2]float64{v[0], 0})
	}
	for i, x := range v {
		out = append(out, [2]float64{x, 100 * float64(i+1) / float64(len(v))})
	}
	return out
}

type htmlSection struct {
	Title  string
	Charts []template.HTML
}

type htmlRow struct {
	Config, Target       string
	N, Err               int
	TTFT, TPS, TPOT, E2E Dist
	Cached               string
	Throughput, Goodput  string
	SLOMissed            bool
	Errors               string
}

type htmlPage struct {
	Rep      *Report
	Title    string
	Started  string
	Duration string
	Loop     string
	SLO      string
	Rows     []htmlRow
	Sections []htmlSection
}

const pageTmpl = `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<style>
body{font-family:system-ui,sans-serif;margin:20px;color:#222}
h1{font-size:22px;margin:0 0 4px} h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}
.meta{color:#555;font-size:13px;margin-bottom:12px}
table{border-collapse:collapse;font-size:11px;font-variant-numeric:tabular-nums}
th,td{padding:2px 5px;border-bottom:1px solid #eee;text-align:right;white-space:nowrap} th{background:#f6f6f6} td.l,th.l{text-align:left}
.miss{color:#b00020;font-weight:600} .charts{display:flex;flex-wrap:wrap;gap:12px}
.partial{background:#fff3cd;padding:6px 10px;border:1px solid #e0c060}
.note{font-size:12px;color:#555}
</style></head><body>
<h1>{{.Title}}</h1>
<div class="meta">mode <b>{{.Rep.Mode}}</b> · model <b>{{.Rep.Model}}</b> · {{.Loop}} · {{.Rep.Requests}} measured requests per configuration and target (warmup {{.Rep.Warmup}} excluded) · started {{.Started}} · {{.Duration}}{{if .SLO}} · SLO {{.SLO}}{{end}}</div>
{{if .Rep.Partial}}<p class="partial">Partial results: the run was interrupted.</p>{{end}}
<table class="summary">
<tr><th class="l">config</th><th class="l">target</th><th>n</th><th>errors</th><th>TTFT p50</th><th>p90</th><th>p95</th><th>p99</th><th>mean</th><th>TPS p50</th><th>p90</th><th>p95</th><th>p99</th><th>mean</th><th>TPOT p50</th><th>E2E p50</th><th>p95</th><th>cached</th><th>tok/s</th><th>goodput</th></tr>
{{range .Rows}}<tr><td class="l">{{.Config}}</td><td class="l">{{.Target}}</td><td>{{.N}}</td><td{{if .Err}} class="miss" title="{{.Errors}}"{{end}}>{{.Err}}</td>
<td>{{ms .TTFT.P50}}</td><td>{{ms .TTFT.P90}}</td><td>{{ms .TTFT.P95}}</td><td>{{ms .TTFT.P99}}</td><td>{{ms .TTFT.Mean}}</td>
<td>{{f1 .TPS.P50}}</td><td>{{f1 .TPS.P90}}</td><td>{{f1 .TPS.P95}}</td><td>{{f1 .TPS.P99}}</td><td>{{f1 .TPS.Mean}}</td>
<td>{{ms .TPOT.P50}}</td><td>{{ms .E2E.P50}}</td><td>{{ms .E2E.P95}}</td><td>{{.Cached}}</td><td>{{.Throughput}}</td><td{{if .SLOMissed}} class="miss"{{end}}>{{.Goodput}}</td></tr>
{{end}}</table>
<p class="note">TTFT and E2E from the send; goodput uses them from the scheduled time. TPS is generation-phase tokens/s (TTFT excluded). Percentiles are exact (nearest rank). Percentiles of TPS are of the per-request values: p90 is high, not low.</p>
{{range .Sections}}<h2>{{.Title}}</h2><div class="charts">{{range .Charts}}{{.}}{{end}}</div>
{{end}}</body></html>
`

// WriteHTML writes a self-contained HTML report: no script, no external
// resource, so it works offline. It holds the summary table and inline SVG
// plots: a CDF of TTFT and of TPS per target for each configuration, p50
// TTFT and TPS against the load level for sweeps (more than one level), and
// TTFT over the course of the run.
func (rep *Report) WriteHTML(w io.Writer) error {
	t, err := template.New("report").Funcs(template.FuncMap{
		"ms": fmtMS,
		"f1": func(v float64) string {
			if v == 0 {
				return "-"
			}
			return strconv.FormatFloat(v, 'f', 1, 64)
		},
	}).Parse(pageTmpl)
	if err != nil {
		return err
	}
	page := htmlPage{Rep: rep, Title: "tpsbench report: " + rep.Model}
	page.Started = rep.Started.Format("2006-01-02 15:04:05 MST")
	page.Duration = rep.Finished.Sub(rep.Started).Round(1e7).String()
	if !rep.SLO.IsZero() {
		page.SLO = rep.SLO.String()
	}
	if len(rep.Configs) > 0 {
		page.Loop = rep.Configs[0].Loop + " loop"
	}
	color := map[string]string{}
	for i, t := range rep.Targets {
		color[t] = palette(i)
	}
	for _, s := range rep.Summaries {
		var errs []string
		for c, n := range s.Errors {
			errs = append(errs, c+"="+strconv.Itoa(n))
		}
		slices.Sort(errs)
		page.Rows = append(page.Rows, htmlRow{
			Config: rep.Configs[s.Config].Label(), Target: rep.short(s.Target), N: s.Requests, Err: s.Requests - s.OK,
			TTFT: s.TTFT, TPS: s.TPS, TPOT: s.TPOT, E2E: s.E2E,
			Cached:     fmt.Sprintf("%.0f%% (%d tok)", 100*s.CachedShare, s.CachedTokens),
			Throughput: strconv.FormatFloat(s.Throughput, 'f', 0, 64),
			Goodput:    fmt.Sprintf("%.0f%%", 100*s.Goodput),
			SLOMissed:  !rep.SLO.IsZero() && !s.SLOMet,
			Errors:     strings.Join(errs, " "),
		})
	}
	for _, sec := range rep.charts(color) {
		hs := htmlSection{Title: sec.title}
		for i := range sec.charts {
			hs.Charts = append(hs.Charts, template.HTML(sec.charts[i].svg())) // #nosec: every text is escaped in svg
		}
		page.Sections = append(page.Sections, hs)
	}
	return t.Execute(w, page)
}

// short returns target without the report's model, for display: every
// target of a report serves the same model, named in the page's header.
func (rep *Report) short(target string) string {
	return strings.TrimSuffix(target, "/"+rep.Model)
}

type chartSection struct {
	title  string
	charts []chart
}

// charts builds the report's plots, section by section.
//
// It is long (about 110 lines, complexity about 35) because it is the
// list of the report's charts, each a few lines choosing its series.
func (rep *Report) charts(color map[string]string) []chartSection {
	byCell := rep.byCell()
	var out []chartSection
	// CDFs per configuration.
	for _, ci := range rep.Configs {
		sec := chartSection{title: "Distributions: " + ci.Label()}
		ttft := chart{id: "ttft-cdf-" + strconv.Itoa(ci.Index), title: "TTFT CDF, " + ci.Label(), xLabel: "TTFT (ms)", yLabel: "% of requests", yMin0: true}
		tpsC := chart{id: "tps-cdf-" + strconv.Itoa(ci.Index), title: "TPS CDF, " + ci.Label(), xLabel: "generation tokens/s", yLabel: "% of requests", yMin0: true}
		for _, t := range rep.Targets {
			var tv, sv []float64
			for _, r := range byCell[cell{ci.Index, t}] {
				if r.OK() && r.TTFTMS > 0 {
					tv = append(tv, r.TTFTMS)
				}
				if r.OK() && r.TPSOK {
					sv = append(sv, r.TPS)
				}
			}
			ttft.add(series{id: t, name: rep.short(t), color: color[t], points: cdf(tv), step: true})
			tpsC.add(series{id: t, name: rep.short(t), color: color[t], points: cdf(sv), step: true})
		}
		if len(ttft.series)+len(tpsC.series) > 0 {
			sec.charts = append(sec.charts, ttft, tpsC)
			out = append(out, sec)
		}
	}
	// Sweeps: one section per cache mode with more than one level.
	caches := []string{}
	for _, ci := range rep.Configs {
		if !slices.Contains(caches, ci.Cache) {
			caches = append(caches, ci.Cache)
		}
	}
	for _, cache := range caches {
		var levels []ConfigInfo
		for _, ci := range rep.Configs {
			if ci.Cache == cache {
				levels = append(levels, ci)
			}
		}
		if len(levels) < 2 {
			continue
		}
		xl := "concurrency"
		if levels[0].Loop == "open" {
			xl = "offered rate (requests/s)"
		}
		tpsS := chart{id: "tps-sweep-" + cache, title: "TPS p50 vs " + xl + ", " + cache, xLabel: xl, yLabel: "generation tokens/s", yMin0: true}
		ttftS := chart{id: "ttft-sweep-" + cache, title: "TTFT p50 vs " + xl + ", " + cache, xLabel: xl, yLabel: "TTFT (ms)", yMin0: true}
		for _, t := range rep.Targets {
			var ps, pt [][2]float64
			for _, ci := range levels {
				if s, ok := rep.Summary(ci.Index, t); ok {
					if s.TPS.N > 0 {
						ps = append(ps, [2]float64{ci.Level(), s.TPS.P50})
					}
					if s.TTFT.N > 0 {
						pt = append(pt, [2]float64{ci.Level(), s.TTFT.P50})
					}
				}
			}
			tpsS.add(series{id: t, name: rep.short(t), color: color[t], points: ps, dots: true})
			ttftS.add(series{id: t, name: rep.short(t), color: color[t], points: pt, dots: true})
		}
		out = append(out, chartSection{title: "Sweep: " + cache + " cache", charts: []chart{tpsS, ttftS}})
	}
	// TTFT over the run, per target.
	// Each configuration is its own stretch of line: no line joins two of them.
	over := chart{id: "ttft-time", title: "TTFT over the run", xLabel: "time since start (s)", yLabel: "TTFT (ms)", yMin0: true}
	for _, t := range rep.Targets {
		var pts [][2]float64
		for _, ci := range rep.Configs {
			var part [][2]float64
			for _, r := range byCell[cell{ci.Index, t}] {
				if r.OK() && r.TTFTMS > 0 {
					part = append(part, [2]float64{r.SentMS / 1000, r.TTFTMS})
				}
			}
			slices.SortFunc(part, func(a, b [2]float64) int { return cmp.Compare(a[0], b[0]) })
			if len(part) > 0 && len(pts) > 0 {
				pts = append(pts, [2]float64{math.NaN(), math.NaN()})
			}
			pts = append(pts, part...)
		}
		over.add(series{id: t, name: rep.short(t), color: color[t], points: pts, dots: true})
	}
	if len(over.series) > 0 {
		out = append(out, chartSection{title: "Over time", charts: []chart{over}})
	}
	return out
}
