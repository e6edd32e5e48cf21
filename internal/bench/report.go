package bench

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// ReportVersion is the version of the JSON report schema (docs/BENCH.md)
// this package writes and reads.
const ReportVersion = 1

// Report is the outcome of a run: its settings, every measured request and a
// Summary per configuration and target. Its JSON form is the schema of
// docs/BENCH.md. A Report is not safe for concurrent modification; once Run
// has returned it, concurrent reads are safe.
type Report struct {
	Version  int       `json:"version"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	Mode     string    `json:"mode"`  // "compare" or "routed"
	Model    string    `json:"model"` // the logical model requested
	// Partial is set when the run was interrupted: the results are those
	// that finished.
	Partial  bool         `json:"partial"`
	SLO      SLO          `json:"slo"`
	Requests int          `json:"requests"` // measured requests per configuration and target
	Warmup   int          `json:"warmup"`
	Seed     uint64       `json:"seed"`
	Configs  []ConfigInfo `json:"configs"`
	Targets  []string     `json:"targets"`
	// Summaries holds one Summary per configuration and target that has
	// results, ordered by configuration then target.
	Summaries []Summary `json:"summaries"`
	Results   []Result  `json:"results"`
}

// Summarize recomputes Summaries from Results and SLO.
func (rep *Report) Summarize() {
	rep.Summaries = rep.Summaries[:0]
	groups := rep.byCell()
	for _, ci := range rep.Configs {
		for _, t := range rep.Targets {
			if rs := groups[cell{ci.Index, t}]; len(rs) > 0 {
				rep.Summaries = append(rep.Summaries, Summarize(rs, rep.SLO))
			}
		}
	}
}

// cell is one configuration (its index) and target of a report.
type cell struct {
	config int
	target string
}

// byCell groups the results by configuration and target, in their order.
func (rep *Report) byCell() map[cell][]Result {
	groups := map[cell][]Result{}
	for _, r := range rep.Results {
		c := cell{r.Config, r.Target}
		groups[c] = append(groups[c], r)
	}
	return groups
}

// Summary returns the Summary of configuration config and target, and false
// when there is none.
func (rep *Report) Summary(config int, target string) (Summary, bool) {
	for _, s := range rep.Summaries {
		if s.Config == config && s.Target == target {
			return s, true
		}
	}
	return Summary{}, false
}

// SLOMet reports whether every Summary met the SLO.
func (rep *Report) SLOMet() bool {
	for _, s := range rep.Summaries {
		if !s.SLOMet {
			return false
		}
	}
	return true
}

// WriteJSON writes rep as indented JSON.
func (rep *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// ErrReport is wrapped by the errors ReadReport returns for input that is
// not a report it can read: malformed JSON, another schema version, or no
// configuration.
var ErrReport = errors.New("bench: unreadable report")

// ReadReport reads a JSON report written by WriteJSON. It refuses another
// schema version, and recomputes the Summaries from the Results so that a
// hand-edited file stays consistent.
func ReadReport(r io.Reader) (*Report, error) {
	var rep Report
	if err := json.NewDecoder(r).Decode(&rep); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrReport, err)
	}
	if rep.Version != ReportVersion {
		return nil, fmt.Errorf("%w: version %d, want %d", ErrReport, rep.Version, ReportVersion)
	}
	if len(rep.Configs) == 0 {
		return nil, fmt.Errorf("%w: no configuration", ErrReport)
	}
	rep.Summarize()
	return &rep, nil
}

// WriteCSV writes one row per measured request, with a header row. Times are
// in milliseconds from the start of the run.
func (rep *Report) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{
		"config", "cache_mode", "loop", "level", "target", "index",
		"provider", "region", "model",
		"scheduled_ms", "sent_ms", "lag_ms", "ttft_ms", "ttft_sched_ms", "tps", "tps_ok",
		"tpot_ms", "e2e_ms", "e2e_sched_ms", "total_ms", "output_tokens", "input_tokens", "cached_tokens",
		"cache", "token_source", "chunks", "finish_reason", "attempts", "error_class", "error_phase", "error",
	})
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }
	for _, r := range rep.Results {
		var ci ConfigInfo
		if r.Config >= 0 && r.Config < len(rep.Configs) {
			ci = rep.Configs[r.Config]
		}
		_ = cw.Write([]string{
			strconv.Itoa(r.Config), ci.Cache, ci.Loop, strconv.FormatFloat(ci.Level(), 'g', -1, 64), r.Target, strconv.Itoa(r.Index),
			r.Deployment.Provider, r.Deployment.Region, r.Deployment.Model,
			f(r.ScheduledMS), f(r.SentMS), f(r.LagMS), f(r.TTFTMS), f(r.TTFTSchedMS), f(r.TPS), strconv.FormatBool(r.TPSOK),
			f(r.TPOTMS), f(r.E2EMS), f(r.E2ESchedMS), f(r.TotalMS),
			strconv.FormatInt(r.OutputTokens, 10), strconv.FormatInt(r.InputTokens, 10), strconv.FormatInt(r.CachedTokens, 10),
			r.Cache, r.TokenSource, strconv.FormatInt(r.Chunks, 10), r.FinishReason, strconv.Itoa(r.Attempts),
			r.ErrorClass, r.ErrorPhase, r.Error,
		})
	}
	cw.Flush()
	return cw.Error()
}

// WriteTable writes the Summaries as an aligned text table, one row per
// configuration and target, followed by the errors by class and the SLO
// verdict.
func (rep *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "config\ttarget\tn\terr\tTTFT p50\tp90\tp95\tp99\tTPS p50\tp90\tp95\tp99\tTPOT p50\tE2E p50\tp95\tcached\ttok/s\tgoodput\t")
	for _, s := range rep.Summaries {
		label := ""
		if s.Config < len(rep.Configs) {
			label = rep.Configs[s.Config].Label()
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t%.1f\t%.1f\t%.1f\t%.1f\t%s\t%s\t%s\t%.0f%%\t%.0f\t%.0f%%%s\t\n",
			label, s.Target, s.Requests, s.Requests-s.OK,
			fmtMS(s.TTFT.P50), fmtMS(s.TTFT.P90), fmtMS(s.TTFT.P95), fmtMS(s.TTFT.P99),
			s.TPS.P50, s.TPS.P90, s.TPS.P95, s.TPS.P99,
			fmtMS(s.TPOT.P50), fmtMS(s.E2E.P50), fmtMS(s.E2E.P95),
			100*s.CachedShare, s.Throughput, 100*s.Goodput, sloMark(rep.SLO, s))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var errLines []string
	for _, s := range rep.Summaries {
		if len(s.Errors) == 0 {
			continue
		}
		var parts []string
		for _, c := range ErrorClasses() {
			if n := s.Errors[c]; n > 0 {
				parts = append(parts, c+"="+strconv.Itoa(n))
			}
		}
		for c, n := range s.Errors {
			if !slices.Contains(ErrorClasses(), c) {
				parts = append(parts, c+"="+strconv.Itoa(n))
			}
		}
		errLines = append(errLines, fmt.Sprintf("  %s %s: %s", rep.Configs[s.Config].Label(), s.Target, strings.Join(parts, " ")))
	}
	if len(errLines) > 0 {
		fmt.Fprintln(w, "errors by class:")
		fmt.Fprintln(w, strings.Join(errLines, "\n"))
	}
	if !rep.SLO.IsZero() {
		fmt.Fprintf(w, "SLO %s: goodput is the share of requests meeting every target (TTFT and E2E from the scheduled send); * = missed\n", rep.SLO)
	}
	if rep.Partial {
		fmt.Fprintln(w, "PARTIAL: the run was interrupted")
	}
	return nil
}

func sloMark(slo SLO, s Summary) string {
	if slo.IsZero() || s.SLOMet {
		return ""
	}
	return "*"
}

// fmtMS formats milliseconds compactly: "850ms", "1.24s".
func fmtMS(v float64) string {
	switch {
	case v == 0:
		return "-"
	case v < 10:
		return strconv.FormatFloat(v, 'f', 2, 64) + "ms"
	case v < 1000:
		return strconv.FormatFloat(v, 'f', 0, 64) + "ms"
	}
	return strconv.FormatFloat(v/1000, 'f', 2, 64) + "s"
}
