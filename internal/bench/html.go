package bench

import (
	"cmp"
	"fmt"
	"html/template"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

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
	Sections []chartSection
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
{{range .Sections}}<h2>{{.Title}}</h2><div class="charts">{{range .Charts}}{{.HTML}}{{end}}</div>
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
		color[t] = Palette(i)
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
	page.Sections = rep.charts(color)
	return t.Execute(w, page)
}

// short returns target without the report's model, for display: every
// target of a report serves the same model, named in the page's header.
func (rep *Report) short(target string) string {
	return strings.TrimSuffix(target, "/"+rep.Model)
}

// chartSection is a titled group of the report's charts.
type chartSection struct {
	Title  string
	Charts []Chart
}

// charts builds the report's plots, section by section.
//
// It is long (about 110 lines, complexity 29) because it is the
// list of the report's charts, each a few lines choosing its series.
func (rep *Report) charts(color map[string]string) []chartSection {
	byCell := rep.byCell()
	var out []chartSection
	// CDFs per configuration.
	for _, ci := range rep.Configs {
		sec := chartSection{Title: "Distributions: " + ci.Label()}
		ttft := Chart{ID: "ttft-cdf-" + strconv.Itoa(ci.Index), Title: "TTFT CDF, " + ci.Label(), XLabel: "TTFT (ms)", YLabel: "% of requests", YFromZero: true}
		tpsC := Chart{ID: "tps-cdf-" + strconv.Itoa(ci.Index), Title: "TPS CDF, " + ci.Label(), XLabel: "generation tokens/s", YLabel: "% of requests", YFromZero: true}
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
			ttft.add(Series{ID: t, Name: rep.short(t), Color: color[t], Points: cdf(tv), Step: true})
			tpsC.add(Series{ID: t, Name: rep.short(t), Color: color[t], Points: cdf(sv), Step: true})
		}
		if len(ttft.Series)+len(tpsC.Series) > 0 {
			sec.Charts = append(sec.Charts, ttft, tpsC)
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
		tpsS := Chart{ID: "tps-sweep-" + cache, Title: "TPS p50 vs " + xl + ", " + cache, XLabel: xl, YLabel: "generation tokens/s", YFromZero: true}
		ttftS := Chart{ID: "ttft-sweep-" + cache, Title: "TTFT p50 vs " + xl + ", " + cache, XLabel: xl, YLabel: "TTFT (ms)", YFromZero: true}
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
			tpsS.add(Series{ID: t, Name: rep.short(t), Color: color[t], Points: ps, Dots: true})
			ttftS.add(Series{ID: t, Name: rep.short(t), Color: color[t], Points: pt, Dots: true})
		}
		out = append(out, chartSection{Title: "Sweep: " + cache + " cache", Charts: []Chart{tpsS, ttftS}})
	}
	// TTFT over the run, per target.
	// Each configuration is its own stretch of line: no line joins two of them.
	over := Chart{ID: "ttft-time", Title: "TTFT over the run", XLabel: "time since start (s)", YLabel: "TTFT (ms)", YFromZero: true}
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
		over.add(Series{ID: t, Name: rep.short(t), Color: color[t], Points: pts, Dots: true})
	}
	if len(over.Series) > 0 {
		out = append(out, chartSection{Title: "Over time", Charts: []Chart{over}})
	}
	return out
}
