package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"math"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/tpsroute/tpsroute/internal/bench"
)

// Baselines returns the default set of policies a scenario is scored with:
// the tpsroute defaults, the oracle, and the five baselines, seeded.
// Generated fleets are scored with RandomBaselines, which adds Mean10.
func Baselines(seed uint64) []Policy {
	return []Policy{Defaults(), Oracle(), RoundRobin(), Random(seed), LiteLLM(seed), P2C(seed), OpenRouter(seed)}
}

// RandomBaselines returns the policies a generated fleet is scored with
// (Distribution): Baselines and Mean10, seeded.
func RandomBaselines(seed uint64) []Policy {
	return append(Baselines(seed), Mean10(seed))
}

// Report is one scenario run under several policies. It is a plain value once
// Compare returned.
type Report struct {
	Scenario *Scenario `json:"scenario"`
	Results  []*Result `json:"results"`
}

// Compare runs sc once per policy, all at the same time, each against its own
// simulated deployments and its own Client (they share nothing, so a run
// takes sc.Duration however many policies there are), and fills every summary's Ratios
// (its mean TPS over each other policy's).
func Compare(ctx context.Context, sc *Scenario, policies []Policy) (*Report, error) {
	rep := &Report{Scenario: sc, Results: make([]*Result, len(policies))}
	errs := make([]error, len(policies))
	var wg sync.WaitGroup
	for i, p := range policies {
		wg.Go(func() { rep.Results[i], errs[i] = Run(ctx, sc, p) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	for _, a := range rep.Results {
		a.Summary.Ratios = map[string]float64{}
		for _, b := range rep.Results {
			if r := ratio(a.Summary.TPSMean, b.Summary.TPSMean); a != b && !math.IsNaN(r) {
				a.Summary.Ratios[b.Policy] = r
			}
		}
	}
	return rep, nil
}

// Result returns the result of the named policy, or nil.
func (rep *Report) Result(policy string) *Result {
	for _, r := range rep.Results {
		if r.Policy == policy {
			return r
		}
	}
	return nil
}

// WriteJSON writes the report as indented JSON: the scenario, and per policy
// the summary and the timeline.
func (rep *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// fmtDur formats a duration in ms or s for the table.
func fmtDur(d time.Duration) string {
	if d < 10*time.Second {
		return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 0, 64) + "ms"
	}
	return d.Round(time.Second).String()
}

// reaction sums up the run's events in a short cell: calls sent to each
// degraded deployment before it was shed, and time to regain share.
func reaction(s Summary) (degraded, regain string) {
	var d, r []string
	for _, e := range s.Events {
		switch e.Kind {
		case "degrade":
			v := strconv.Itoa(e.CallsBeforeShed)
			if !e.Shed {
				v += " (never shed)"
			}
			d = append(d, v)
		default:
			if e.Regained {
				r = append(r, e.Regain.Round(time.Second).String())
			} else {
				r = append(r, "never")
			}
		}
	}
	if len(d) == 0 {
		d = []string{"-"}
	}
	if len(r) == 0 {
		r = []string{"-"}
	}
	return strings.Join(d, ","), strings.Join(r, ",")
}

// rows returns one row of cells per policy, in tableHeader's order.
func (rep *Report) rows() [][]string {
	var out [][]string
	ref := func(r *Result, name string) string {
		if v, ok := r.Summary.Ratios[name]; ok {
			return strconv.FormatFloat(v, 'f', 2, 64)
		}
		return "-"
	}
	for _, r := range rep.Results {
		s := r.Summary
		degraded, regain := reaction(s)
		out = append(out, []string{
			r.Policy, strconv.Itoa(s.Calls), strconv.Itoa(s.Failed),
			strconv.FormatFloat(s.TPSP50, 'f', 0, 64), strconv.FormatFloat(s.TPSMean, 'f', 0, 64),
			fmtDur(s.TTFTP50), fmtDur(s.TTFTP95),
			strconv.FormatFloat(s.CostPerMOutput, 'f', 3, 64),
			degraded, regain, ref(r, "oracle"), ref(r, "tpsroute"),
			strconv.FormatFloat(s.TrueBest, 'f', 2, 64),
		})
	}
	return out
}

// tableHeader is the table's columns.
var tableHeader = []string{"policy", "calls", "failed", "TPS p50", "TPS mean", "TTFT p50", "TTFT p95", "$/1M out", "sent degraded", "regain", "TPS/oracle", "TPS/tpsroute", "true best"}

// WriteTable writes one aligned text row per policy: calls, failed calls,
// delivered TPS p50 and mean, TTFT p50 and p95, cost per million output
// tokens, calls sent to each degraded deployment before its share fell below
// 20%, time to regain share after each recovery or join, mean TPS over the
// oracle's and the defaults', and the share of calls sent to the deployment
// truly best for them (Summary.TrueBest).
func (rep *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%s\t\n", strings.Join(tableHeader, "\t"))
	for _, r := range rep.rows() {
		fmt.Fprintf(tw, "%s\t\n", strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// WriteMarkdown writes the table as a Markdown table, for docs.
func (rep *Report) WriteMarkdown(w io.Writer) error {
	fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(tableHeader, " | "), strings.Repeat("---|", len(tableHeader)))
	for _, r := range rep.rows() {
		fmt.Fprintf(w, "| %s |\n", strings.Join(r, " | "))
	}
	return nil
}

// Charts returns the report's plots: the share of each deployment over time
// under the defaults (tpsroute, or the first policy), and the delivered mean
// TPS over time of every policy, the oracle's included.
func (rep *Report) Charts() []bench.Chart {
	if len(rep.Results) == 0 {
		return nil
	}
	main := rep.Result("tpsroute")
	if main == nil {
		main = rep.Results[0]
	}
	minutes := func(d time.Duration) float64 { return d.Minutes() }
	share := bench.Chart{ID: "share", Title: rep.Scenario.Name + ": share per deployment (" + main.Policy + ")", XLabel: "minutes", YLabel: "share of calls (%)", YFromZero: true}
	for i, d := range rep.Scenario.Deployments {
		s := bench.Series{ID: d.name(), Name: d.name()}
		for _, b := range main.Timeline {
			if b.Calls > 0 {
				s.Points = append(s.Points, [2]float64{minutes(b.Start + main.Bucket/2), 100 * b.Share[i]})
			}
		}
		share.Series = append(share.Series, s)
	}
	tps := bench.Chart{ID: "tps", Title: rep.Scenario.Name + ": delivered TPS", XLabel: "minutes", YLabel: "mean TPS (tokens/s)", YFromZero: true}
	for _, r := range rep.Results {
		s := bench.Series{ID: r.Policy, Name: r.Policy}
		for _, b := range r.Timeline {
			if b.TPSMean > 0 {
				s.Points = append(s.Points, [2]float64{minutes(b.Start + r.Bucket/2), b.TPSMean})
			}
		}
		tps.Series = append(tps.Series, s)
	}
	return []bench.Chart{share, tps}
}

const simPage = `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<style>
body{font-family:system-ui,sans-serif;margin:20px;color:#222}
h1{font-size:22px;margin:0 0 4px} h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}
.meta{color:#555;font-size:13px;margin-bottom:12px}
table{border-collapse:collapse;font-size:12px;font-variant-numeric:tabular-nums}
th,td{padding:2px 6px;border-bottom:1px solid #eee;text-align:right;white-space:nowrap} th{background:#f6f6f6} td.l,th.l{text-align:left}
.charts{display:flex;flex-wrap:wrap;gap:12px}
</style></head><body>
{{range .Sections}}<h1>{{.Title}}</h1>
<div class="meta">{{.Meta}}</div>
<table class="summary"><tr>{{range $.Header}}<th>{{.}}</th>{{end}}</tr>
{{range .Rows}}<tr>{{range .}}<td>{{.}}</td>{{end}}</tr>
{{end}}</table>
<div class="charts">{{range .Charts}}{{.HTML}}{{end}}</div>
{{end}}</body></html>
`

// WriteHTML writes a self-contained HTML page (no script, no external
// resource, so it works offline) with, for each report, the table and the
// inline SVG plots of Charts.
func WriteHTML(w io.Writer, reps ...*Report) error {
	t, err := template.New("sim").Parse(simPage)
	if err != nil {
		return err
	}
	type section struct {
		Title, Meta string
		Rows        [][]string
		Charts      []bench.Chart
	}
	page := struct {
		Title    string
		Header   []string
		Sections []section
	}{Title: "tpsbench sim", Header: tableHeader}
	for _, rep := range reps {
		page.Sections = append(page.Sections, section{Title: "scenario " + rep.Scenario.Name,
			Meta: rep.Scenario.Description, Rows: rep.rows(), Charts: rep.Charts()})
	}
	if len(reps) == 1 {
		page.Title = "tpsbench sim: " + reps[0].Scenario.Name
	}
	return t.Execute(w, page)
}
