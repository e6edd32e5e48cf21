package bench

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tpsroute/tpsroute/fallback"
	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/tps"
)

// Result is one measured request. Times are milliseconds from the start of
// the run (Report.Started), so a Result survives a JSON round trip exactly.
// A Result is a plain value, safe for concurrent reads.
type Result struct {
	Config int    `json:"config"` // index into Report.Configs
	Target string `json:"target"` // deployment "provider/region/model", or "routed"
	Index  int    `json:"index"`  // 0-based measured request number within config × target

	// Deployment answered the request; the zero Key when none did.
	Deployment measure.Key `json:"deployment"`

	ScheduledMS float64 `json:"scheduled_ms"` // when the load plan said to send it
	SentMS      float64 `json:"sent_ms"`      // when it was actually sent
	LagMS       float64 `json:"lag_ms"`       // SentMS - ScheduledMS: the harness's own delay

	// Durations from Sample, in milliseconds, measured from the send time.
	// Zero means the event did not happen.
	TTFTMS float64 `json:"ttft_ms"`
	TPOTMS float64 `json:"tpot_ms"`
	E2EMS  float64 `json:"e2e_ms"`
	// TotalMS is from the send to the end of the stream (EOF, error or close).
	TotalMS float64 `json:"total_ms"`
	// TTFTSchedMS and E2ESchedMS are measured from the scheduled time, so
	// queueing in the harness or the router is never hidden (no coordinated
	// omission). Zero when the event did not happen.
	TTFTSchedMS float64 `json:"ttft_sched_ms"`
	E2ESchedMS  float64 `json:"e2e_sched_ms"`

	TPS   float64 `json:"tps"`    // generation-phase tokens/s; valid only if TPSOK
	TPSOK bool    `json:"tps_ok"` // at least two output chunks

	OutputTokens int64  `json:"output_tokens"`
	InputTokens  int64  `json:"input_tokens"`
	CachedTokens int64  `json:"cached_tokens"`
	Cache        string `json:"cache"`        // provider-reported cache state: "cold", "warm" or "unknown"
	TokenSource  string `json:"token_source"` // "usage", "tokenizer", "chunks" or "none"
	Chunks       int64  `json:"chunks"`
	FinishReason string `json:"finish_reason,omitempty"`
	Attempts     int    `json:"attempts,omitempty"` // attempts of the call (Response.Attempts, or the *fallback.Error's)

	// Error is the failure's message and ErrorClass its class (see
	// ErrorClasses); both empty on success.
	Error      string `json:"error,omitempty"`
	ErrorClass string `json:"error_class,omitempty"`
	ErrorPhase string `json:"error_phase,omitempty"` // "connect", "headers", "first_token" or "mid_stream"

	// Sample is the full measurement. It is not part of the JSON form.
	Sample tps.Sample `json:"-"`
}

// OK reports whether the request succeeded.
func (r *Result) OK() bool { return r.ErrorClass == "" }

// ErrorClasses returns the values of Result.ErrorClass in report order;
// docs/BENCH.md's table of error classes defines each.
func ErrorClasses() []string {
	return []string{
		"rate_limit", "quota", "auth", "bad_request", "not_found", "server",
		"timeout", "connect", "first_token", "mid_stream", "skipped",
		"no_deployment", "canceled", "other",
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func msDur(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }

// phaseName is the report's spelling of p: tps.Phase's String in snake_case
// ("first-token" becomes "first_token"), as the error classes are spelled in
// the JSON and CSV schema of docs/BENCH.md, and "" for PhaseNone, so
// error_phase is omitted when no phase is known.
func phaseName(p tps.Phase) string {
	if p == tps.PhaseNone {
		return ""
	}
	return strings.ReplaceAll(p.String(), "-", "_")
}

// fill sets r's measurement fields from s; TTFT and E2E are taken from sent,
// the harness's send time, so routing and failed attempts are included.
func (r *Result) fill(s tps.Sample, sent time.Time) {
	r.Sample = s
	r.TPOTMS = ms(s.TPOT)
	if !s.Start.IsZero() {
		if s.TTFT > 0 {
			r.TTFTMS = ms(s.Start.Add(s.TTFT).Sub(sent))
		}
		if s.E2E > 0 {
			r.E2EMS = ms(s.Start.Add(s.E2E).Sub(sent))
		}
		if s.Total > 0 {
			r.TotalMS = ms(s.Start.Add(s.Total).Sub(sent))
		}
	}
	r.TPS, r.TPSOK = s.TPS, s.TPSOK
	r.OutputTokens, r.InputTokens, r.CachedTokens = s.OutputTokens, s.InputTokens, s.CachedTokens
	r.Cache, r.TokenSource = s.Cache.String(), s.TokenSource.String()
	r.Chunks, r.FinishReason = s.Chunks, s.FinishReason
}

// schedule sets the schedule fields of r, whose TTFTMS and E2EMS are set.
func (r *Result) schedule(run0, scheduled, sent time.Time) {
	r.ScheduledMS = ms(scheduled.Sub(run0))
	r.SentMS = ms(sent.Sub(run0))
	r.LagMS = ms(sent.Sub(scheduled))
	if r.TTFTMS > 0 {
		r.TTFTSchedMS = r.TTFTMS + r.LagMS
	}
	if r.E2EMS > 0 {
		r.E2ESchedMS = r.E2EMS + r.LagMS
	}
}

// errorClass names the report's class (docs/BENCH.md) of a request whose
// deciding attempt was a (fallback.Error.Last), from what the Executor
// determined of it: its Class, HTTP Status, Phase and Timeout. The cases are
// in order of precedence: not sent, the provider's answer, the request's own
// deadline, how far the attempt got.
func errorClass(a fallback.Attempt) string {
	switch s := a.Status; {
	case a.Class == fallback.ClassSkipped:
		return "skipped"
	case s == http.StatusTooManyRequests && a.Class == fallback.ClassUnavailable:
		return "quota"
	case s == http.StatusTooManyRequests:
		return "rate_limit"
	case s == http.StatusUnauthorized, s == http.StatusForbidden:
		return "auth"
	case s == http.StatusNotFound:
		return "not_found"
	case s == http.StatusRequestTimeout, s == http.StatusGatewayTimeout:
		return "timeout"
	case s >= 400 && s < 500:
		return "bad_request"
	case s >= 500 && s != http.StatusBadGateway: // a 502, "the upstream did not answer", counts by phase: connect
		return "server"
	case a.Class == fallback.ClassCanceled && a.Timeout():
		return "timeout" // Config.Timeout after output; failed reports it before as canceled
	case a.Phase == tps.PhaseMidStream:
		return "mid_stream"
	case a.Timeout():
		return "timeout"
	case a.Phase == tps.PhaseFirstToken:
		return "first_token"
	case a.Phase == tps.PhaseConnect, a.Phase == tps.PhaseHeaders:
		return "connect"
	}
	return "other"
}

// Dist summarises one metric over the successful requests of a Summary:
// exact order statistics of the sorted values (nearest rank), no sketch.
// Durations are in milliseconds, TPS in tokens/s. N is 0 when no request
// had the metric; the other fields are then 0. Dist is a plain value, safe
// for concurrent reads.
type Dist struct {
	N    int     `json:"n"`
	Mean float64 `json:"mean"`
	Min  float64 `json:"min"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P95  float64 `json:"p95"`
	P99  float64 `json:"p99"`
	Max  float64 `json:"max"`
}

// Percentile returns the exact nearest-rank percentile q (0 < q <= 100) of
// sorted, which must be in increasing order, and false when it is empty.
func Percentile(sorted []float64, q float64) (float64, bool) {
	n := len(sorted)
	if n == 0 {
		return 0, false
	}
	rank := int(math.Ceil(q / 100 * float64(n)))
	rank = min(max(rank, 1), n)
	return sorted[rank-1], true
}

// NewDist returns the Dist of values; it sorts values in place.
func NewDist(values []float64) Dist {
	if len(values) == 0 {
		return Dist{}
	}
	slices.Sort(values)
	d := Dist{N: len(values), Min: values[0], Max: values[len(values)-1]}
	sum := 0.0
	for _, v := range values {
		sum += v
	}
	d.Mean = sum / float64(len(values))
	d.P50, _ = Percentile(values, 50)
	d.P90, _ = Percentile(values, 90)
	d.P95, _ = Percentile(values, 95)
	d.P99, _ = Percentile(values, 99)
	return d
}

// SLO is a service-level objective for goodput: a request is good when it
// succeeded and meets every target set. The zero SLO has no target, and
// every successful request is good. SLO is a plain value, safe for
// concurrent use.
type SLO struct {
	// TTFT is the largest acceptable time to first token, measured from the
	// scheduled send time. Zero means no TTFT target.
	TTFT time.Duration `json:"ttft,omitempty"`
	// TPS is the smallest acceptable generation tokens/s. Zero means none.
	TPS float64 `json:"tps,omitempty"`
	// E2E is the largest acceptable end-to-end time from the scheduled send
	// time. Zero means none.
	E2E time.Duration `json:"e2e,omitempty"`
	// Percentile is the share of requests, in percent, that must be good for
	// the SLO to be met: "TTFT p95 <= 300ms" is TTFT 300ms at Percentile 95.
	// Zero means 95.
	Percentile float64 `json:"percentile,omitempty"`
}

// IsZero reports whether s sets no target.
func (s SLO) IsZero() bool { return s.TTFT == 0 && s.TPS == 0 && s.E2E == 0 }

func (s SLO) percentile() float64 {
	if s.Percentile <= 0 {
		return 95
	}
	return s.Percentile
}

// Good reports whether r meets every target of s.
func (s SLO) Good(r *Result) bool {
	if !r.OK() {
		return false
	}
	if s.TTFT > 0 && (r.TTFTSchedMS <= 0 || msDur(r.TTFTSchedMS) > s.TTFT) {
		return false
	}
	if s.TPS > 0 && (!r.TPSOK || r.TPS < s.TPS) {
		return false
	}
	if s.E2E > 0 && (r.E2ESchedMS <= 0 || msDur(r.E2ESchedMS) > s.E2E) {
		return false
	}
	return true
}

// String returns the SLO in ParseSLO's syntax, e.g. "ttft=300ms,tps=30,p=95".
func (s SLO) String() string {
	var parts []string
	if s.TTFT > 0 {
		parts = append(parts, "ttft="+s.TTFT.String())
	}
	if s.TPS > 0 {
		parts = append(parts, "tps="+strconv.FormatFloat(s.TPS, 'g', -1, 64))
	}
	if s.E2E > 0 {
		parts = append(parts, "e2e="+s.E2E.String())
	}
	parts = append(parts, "p="+strconv.FormatFloat(s.percentile(), 'g', -1, 64))
	return strings.Join(parts, ",")
}

// ParseSLO parses a comma-separated SLO such as "ttft=300ms,tps=30" or
// "ttft=1s,e2e=10s,p=99". Keys: ttft and e2e (Go durations), tps (tokens/s),
// p (percent of good requests required, default 95). "" is the zero SLO.
func ParseSLO(text string) (SLO, error) {
	var s SLO
	if strings.TrimSpace(text) == "" {
		return s, nil
	}
	for part := range strings.SplitSeq(text, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return SLO{}, fmt.Errorf("bench: slo %q: want key=value", part)
		}
		var err error
		switch strings.ToLower(k) {
		case "ttft":
			s.TTFT, err = time.ParseDuration(v)
		case "e2e":
			s.E2E, err = time.ParseDuration(v)
		case "tps":
			s.TPS, err = strconv.ParseFloat(v, 64)
		case "p":
			s.Percentile, err = strconv.ParseFloat(v, 64)
			if err == nil && (s.Percentile <= 0 || s.Percentile > 100) {
				err = errors.New("must be in (0, 100]")
			}
		default:
			return SLO{}, fmt.Errorf("bench: slo: unknown key %q (want ttft, tps, e2e or p)", k)
		}
		if err != nil {
			return SLO{}, fmt.Errorf("bench: slo %s: %v", k, err)
		}
	}
	if s.TTFT < 0 || s.E2E < 0 || s.TPS < 0 || math.IsNaN(s.TPS) {
		return SLO{}, errors.New("bench: slo: targets must not be negative")
	}
	return s, nil
}

// Summary is the outcome of one configuration for one target: percentiles,
// errors by class, tokens, throughput and goodput. Summary is a value; its
// Errors map must not be modified while others read it.
type Summary struct {
	Config int    `json:"config"`
	Target string `json:"target"`

	Requests int            `json:"requests"` // measured requests (warmup excluded)
	OK       int            `json:"ok"`
	Errors   map[string]int `json:"errors"` // failed requests by class

	TTFT      Dist `json:"ttft_ms"`       // from send
	TTFTSched Dist `json:"ttft_sched_ms"` // from scheduled time
	TPS       Dist `json:"tps"`
	TPOT      Dist `json:"tpot_ms"`
	E2E       Dist `json:"e2e_ms"`
	E2ESched  Dist `json:"e2e_sched_ms"`
	Lag       Dist `json:"lag_ms"` // schedule lag

	InputTokens  int64 `json:"input_tokens"`
	CachedTokens int64 `json:"cached_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	// CachedShare is CachedTokens / InputTokens; 0 when no input was reported.
	CachedShare float64 `json:"cached_share"`

	// DurationMS is from the first scheduled send to the last end.
	DurationMS float64 `json:"duration_ms"`
	// Throughput is the aggregate output tokens/s over DurationMS.
	Throughput float64 `json:"throughput_tps"`
	// RequestRate is the completed requests/s over DurationMS.
	RequestRate float64 `json:"request_rate"`

	// Goodput is the share of requests (0..1) that met every target of the
	// report's SLO; SLOMet says whether it reached the SLO's percentile.
	// With the zero SLO, Goodput is the success rate and SLOMet is true.
	Goodput float64 `json:"goodput"`
	SLOMet  bool    `json:"slo_met"`
}

// Summarize computes the Summary of results (those of one configuration and
// one target) under slo.
func Summarize(results []Result, slo SLO) Summary {
	var s Summary
	s.Errors = map[string]int{}
	if len(results) == 0 {
		return s
	}
	s.Config, s.Target = results[0].Config, results[0].Target
	var ttft, ttftS, tpsV, tpot, e2e, e2eS, lag []float64
	first, last := math.Inf(1), math.Inf(-1)
	good := 0
	for i := range results {
		r := &results[i]
		s.Requests++
		lag = append(lag, r.LagMS)
		first = min(first, r.ScheduledMS)
		last = max(last, r.SentMS+max(r.TotalMS, r.E2EMS))
		if !r.OK() {
			s.Errors[r.ErrorClass]++
			continue
		}
		s.OK++
		if slo.Good(r) {
			good++
		}
		if r.TTFTMS > 0 {
			ttft = append(ttft, r.TTFTMS)
			ttftS = append(ttftS, r.TTFTSchedMS)
		}
		if r.TPSOK {
			tpsV = append(tpsV, r.TPS)
		}
		if r.TPOTMS > 0 {
			tpot = append(tpot, r.TPOTMS)
		}
		if r.E2EMS > 0 {
			e2e = append(e2e, r.E2EMS)
			e2eS = append(e2eS, r.E2ESchedMS)
		}
		s.InputTokens += r.InputTokens
		s.CachedTokens += r.CachedTokens
		s.OutputTokens += r.OutputTokens
	}
	s.TTFT, s.TTFTSched, s.TPS = NewDist(ttft), NewDist(ttftS), NewDist(tpsV)
	s.TPOT, s.E2E, s.E2ESched, s.Lag = NewDist(tpot), NewDist(e2e), NewDist(e2eS), NewDist(lag)
	if s.InputTokens > 0 {
		s.CachedShare = float64(s.CachedTokens) / float64(s.InputTokens)
	}
	s.DurationMS = max(last-first, 0)
	if s.DurationMS > 0 {
		s.Throughput = float64(s.OutputTokens) / (s.DurationMS / 1000)
		s.RequestRate = float64(s.OK) / (s.DurationMS / 1000)
	}
	s.Goodput = float64(good) / float64(s.Requests)
	s.SLOMet = s.Goodput*100 >= slo.percentile()-1e-9
	if slo.IsZero() {
		s.SLOMet = true
	}
	return s
}
