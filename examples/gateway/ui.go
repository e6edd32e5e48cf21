package main

import (
	_ "embed"
	"maps"
	"net/http"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/tpsroute/tpsroute/fallback"
	"github.com/tpsroute/tpsroute/measure"
)

// The debug page is static HTML and a plain script (no build step) that polls
// GET /debug/tpsroute/history and draws the table and its sparklines.
var (
	//go:embed ui/index.html
	uiHTML []byte
	//go:embed ui/ui.js
	uiJS []byte
)

// historyInterval is the spacing of history samples; historyLen samples make
// five minutes of sparkline.
const (
	historyInterval = 2 * time.Second
	historyLen      = 150
	failoverLen     = 20
)

// history keeps, per deployment key, the last historyLen samples of traffic
// share, TTFT p50 and TPS p50, and the last failoverLen failed attempts. It is
// safe for concurrent use.
//
// Its maps hold only the keys of the latest sample (the configured
// deployments and the keys measure still holds): a key gone from the
// statistics (a wildcard deployment's model idle past measure's retention)
// is dropped at the next sample, so they hold at most the configured
// deployments plus max_wildcard_models per wildcard deployment.
type history struct {
	mu        sync.Mutex
	last      time.Time
	times     []time.Time
	series    map[measure.Key]*series
	requests  map[measure.Key]int64 // Requests at the previous sample
	failovers []failoverView
}

// series is one key's samples; a NaN-free nil means "no value at that time".
type series struct {
	Share []*float64 `json:"share"`  // share of the attempts recorded in the interval
	TTFT  []*float64 `json:"ttft_s"` // windowed TTFT p50, seconds
	TPS   []*float64 `json:"tps"`    // windowed generation TPS p50
}

// failoverView is one failed attempt the call moved on from.
type failoverView struct {
	Time       time.Time `json:"time"`
	Deployment string    `json:"deployment"`
	Class      string    `json:"class"`
	Phase      string    `json:"phase"`
	Status     int       `json:"status,omitempty"`
}

func newHistory() *history {
	return &history{series: map[measure.Key]*series{}, requests: map[measure.Key]int64{}}
}

// attempt records a failed attempt: the gateway's Config.OnAttempt. An
// attempt that did not fail over, and a failure of the caller's own request
// (fallback.Class.CallerFault: invalid, context length, content policy), is
// not a failover of the deployment's.
func (h *history) attempt(a fallback.Attempt) {
	switch {
	case a.Class == fallback.ClassNone, a.Class == fallback.ClassSkipped, a.Class == fallback.ClassCanceled, a.Class.CallerFault():
		return
	}
	f := failoverView{Time: time.Now(), Deployment: a.Key.String(), Class: a.Class.String(), Phase: a.Phase.String(), Status: a.Status}
	h.mu.Lock()
	h.failovers = append(h.failovers, f)
	if len(h.failovers) > failoverLen {
		h.failovers = slices.Delete(h.failovers, 0, len(h.failovers)-failoverLen)
	}
	h.mu.Unlock()
}

// sample appends one sample of snap taken at now, unless the last one is
// less than historyInterval/2 old.
func (h *history) sample(now time.Time, keys []measure.Key, snap measure.Snapshot) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.last.IsZero() && now.Sub(h.last) < historyInterval/2 {
		return
	}
	h.last = now
	var total int64
	delta := make(map[measure.Key]int64, len(keys))
	for _, k := range keys {
		st, _ := snap.Lookup(k)
		d := st.Requests - h.requests[k]
		if d < 0 { // pruned and seen again
			d = st.Requests
		}
		h.requests[k] = st.Requests
		delta[k] = d
		total += d
	}
	h.times = push(h.times, now)
	for _, k := range keys {
		s := h.series[k]
		if s == nil {
			s = &series{}
			// A key seen late starts with as many empty samples as the others.
			for range len(h.times) - 1 {
				s.Share, s.TTFT, s.TPS = append(s.Share, nil), append(s.TTFT, nil), append(s.TPS, nil)
			}
			h.series[k] = s
		}
		st, _ := snap.Lookup(k)
		var share *float64
		if total > 0 {
			share = ptr(float64(delta[k]) / float64(total))
		}
		s.Share = push(s.Share, share)
		s.TTFT = push(s.TTFT, positive(st.TTFT.P50))
		s.TPS = push(s.TPS, positive(st.TPS.P50))
	}
	// Drop the keys that are gone.
	maps.DeleteFunc(h.series, func(k measure.Key, _ *series) bool { _, ok := delta[k]; return !ok })
	maps.DeleteFunc(h.requests, func(k measure.Key, _ int64) bool { _, ok := delta[k]; return !ok })
}

func push[T any](s []T, v T) []T {
	s = append(s, v)
	if len(s) > historyLen {
		s = slices.Delete(s, 0, len(s)-historyLen)
	}
	return s
}

func ptr(v float64) *float64 { return &v }

func positive(v float64) *float64 {
	if v > 0 {
		return &v
	}
	return nil
}

// historyRow is one deployment of GET /debug/tpsroute/history.
type historyRow struct {
	Deployment string  `json:"deployment"`
	Breaker    string  `json:"breaker"`
	Cooling    bool    `json:"cooling"`
	InFlight   int64   `json:"in_flight"`
	Requests   int64   `json:"requests"`
	ErrorRate  float64 `json:"error_rate"`
	ShareTotal float64 `json:"share_total"` // of all attempts since start
	series
}

// historyView is the body of GET /debug/tpsroute/history.
type historyView struct {
	Time        time.Time      `json:"time"`
	Uptime      string         `json:"uptime"`
	IntervalS   float64        `json:"interval_s"`
	Deployments []historyRow   `json:"deployments"`
	Failovers   []failoverView `json:"failovers"` // most recent first
}

// sample takes a history sample of v, the debug snapshot now, and returns v.
func (g *gateway) sample(v debugView) debugView {
	keys := make([]measure.Key, len(v.Deployments))
	for i, d := range v.Deployments {
		keys[i] = d.Key
	}
	g.hist.sample(v.Time, keys, v.Snapshot)
	return v
}

// sampleEvery samples the history every historyInterval until done is closed.
func (g *gateway) sampleEvery(done <-chan struct{}) {
	t := time.NewTicker(historyInterval)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			g.sample(g.view())
		}
	}
}

// debugHistory serves GET /debug/tpsroute/history, the debug page's data.
func (g *gateway) debugHistory(w http.ResponseWriter, _ *http.Request) {
	v := g.sample(g.view())
	out := historyView{Time: v.Time, Uptime: v.Uptime, IntervalS: historyInterval.Seconds(), Deployments: make([]historyRow, 0, len(v.Deployments))}
	h := g.hist
	h.mu.Lock()
	for _, d := range v.Deployments {
		row := historyRow{Deployment: d.Key.String(), Breaker: d.Breaker, Cooling: d.CoolingUntil != nil, InFlight: d.InFlight,
			Requests: d.Requests, ErrorRate: d.ErrorRate, ShareTotal: d.TrafficShare}
		if s := h.series[d.Key]; s != nil {
			row.series = series{Share: slices.Clone(s.Share), TTFT: slices.Clone(s.TTFT), TPS: slices.Clone(s.TPS)}
		}
		out.Deployments = append(out.Deployments, row)
	}
	out.Failovers = slices.Clone(h.failovers)
	h.mu.Unlock()
	sort.SliceStable(out.Failovers, func(i, j int) bool { return out.Failovers[i].Time.After(out.Failovers[j].Time) })
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, out)
}

// debugUI serves GET /debug/tpsroute/ui: a page whose script polls the
// history every two seconds and redraws without reloading.
func (g *gateway) debugUI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'unsafe-inline'; img-src data:")
	_, _ = w.Write(uiHTML)
}

// debugUIScript serves the page's script.
func (g *gateway) debugUIScript(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(uiJS)
}
