package main

import (
	"cmp"
	"crypto/subtle"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/tpsroute/tpsroute/fleet"
	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/route"
)

// models serves GET /v1/models: the logical models, as an OpenAI model list.
// The list is the one tpsroute.Client.Transport answers GET .../models with,
// so the gateway and a Go program using the Transport list the same models
// in the same shape ("owned_by": "tpsroute", "created": 0).
func (g *gateway) models(w http.ResponseWriter, r *http.Request) {
	req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, "http://tpsroute.invalid/v1/models", nil)
	if err != nil {
		http.Error(w, "gateway: models: "+err.Error(), http.StatusInternalServerError)
		return
	}
	resp, err := g.c.Transport().RoundTrip(req)
	if err != nil {
		http.Error(w, "gateway: models: "+err.Error(), http.StatusInternalServerError)
		return
	}
	defer resp.Body.Close()
	for _, k := range []string{"Content-Type", "Content-Length"} {
		if v := resp.Header.Get(k); v != "" {
			w.Header().Set(k, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

// healthz serves GET /healthz: 200 while serving, 503 while draining.
func (g *gateway) healthz(w http.ResponseWriter, _ *http.Request) {
	if g.draining.Load() {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "draining"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// deploymentView is one row of the debug snapshot.
type deploymentView struct {
	Key          measure.Key `json:"key"`
	Breaker      string      `json:"breaker"`                 // "closed", "half-open" or "open"
	CoolingUntil *time.Time  `json:"cooling_until,omitempty"` // a pending Retry-After cooldown
	NoHeadroom   bool        `json:"no_headroom"`             // RPM/TPM limiter, in-flight cap or learnt concurrency limit exhausted
	RateLimited  bool        `json:"rate_limited"`            // the provider said x-ratelimit-remaining 0
	TrafficShare float64     `json:"traffic_share"`           // share of all recorded attempts, in [0,1]
	InFlight     int64       `json:"in_flight"`
	Requests     int64       `json:"requests"`
	ErrorRate    float64     `json:"error_rate"` // windowed, in [0,1]
	TTFTP50      float64     `json:"ttft_p50_s"` // seconds; 0 when unknown
	TTFTP95      float64     `json:"ttft_p95_s"`
	TPSP50       float64     `json:"tps_p50"` // generation tokens/s; 0 when unknown
	TPSP95       float64     `json:"tps_p95"`
	// FleetTTFTP50 and FleetRequests are what the other replicas of the
	// fleet measured (fleet mode only; routing reads both theirs and ours).
	FleetTTFTP50  float64 `json:"fleet_ttft_p50_s,omitempty"`
	FleetRequests int64   `json:"fleet_requests,omitempty"`
}

// debugView is the body of GET /debug/tpsroute.
type debugView struct {
	Time        time.Time        `json:"time"`
	Uptime      string           `json:"uptime"`
	Deployments []deploymentView `json:"deployments"`
	Route       route.Stats      `json:"route"`
	// RefusedModels counts models refused without creating statistics
	// (tpsroute.Client.RefusedModels): unknown to every deployment's list,
	// or over a wildcard deployment's cap.
	RefusedModels uint64           `json:"refused_models"`
	Snapshot      measure.Snapshot `json:"snapshot"` // measure's full statistics per key
	Fleet         *fleetView       `json:"fleet,omitempty"`
}

// fleetView is the fleet's status on the debug page (absent without -redis
// or a "fleet" section).
type fleetView struct {
	fleet.Status
	LastSyncAge float64 `json:"last_sync_age_s"` // seconds since the last successful sync; -1 before the first
}

// view builds the debug snapshot: every configured concrete deployment and
// every key measured (wildcard deployments per model requested).
func (g *gateway) view() debugView {
	now := time.Now()
	snap := g.c.Stats()
	keys := map[measure.Key]bool{}
	for _, d := range g.deps {
		if !d.IsWildcard() {
			keys[d.Key()] = true
		}
	}
	for _, k := range snap.Keys() {
		keys[k] = true
	}
	var total int64
	for _, s := range snap.All() {
		total += s.Requests
	}
	v := debugView{Time: now, Uptime: now.Sub(g.started).Round(time.Second).String(), Route: g.c.RouteStats(), RefusedModels: g.c.RefusedModels(), Snapshot: snap,
		Deployments: make([]deploymentView, 0, len(keys))}
	if g.opts.Fleet != nil {
		fv := &fleetView{Status: g.opts.Fleet.Status(now), LastSyncAge: -1}
		if !fv.LastSync.IsZero() {
			fv.LastSyncAge = now.Sub(fv.LastSync).Seconds()
		}
		v.Fleet = fv
	}
	for k := range keys {
		st := g.c.Status(k)
		dv := deploymentView{Key: k, Breaker: st.Breaker.String(), NoHeadroom: st.NoHeadroom, RateLimited: st.RateLimited}
		if st.CoolingUntil.After(now) {
			t := st.CoolingUntil
			dv.CoolingUntil = &t
		}
		if s, ok := snap.Lookup(k); ok {
			dv.InFlight, dv.Requests, dv.ErrorRate = s.InFlight, s.Requests, s.ErrorRate
			dv.TTFTP50, dv.TTFTP95 = s.TTFT.P50, s.TTFT.P95
			dv.TPSP50, dv.TPSP95 = s.TPS.P50, s.TPS.P95
			if s.Fleet != nil {
				dv.FleetTTFTP50, dv.FleetRequests = s.Fleet.TTFT.P50, s.Fleet.Requests
			}
			if total > 0 {
				dv.TrafficShare = float64(s.Requests) / float64(total)
			}
		}
		v.Deployments = append(v.Deployments, dv)
	}
	slices.SortFunc(v.Deployments, func(x, y deploymentView) int {
		a, b := x.Key, y.Key
		return cmp.Or(cmp.Compare(a.Model, b.Model), cmp.Compare(a.Provider, b.Provider), cmp.Compare(a.Region, b.Region))
	})
	return v
}

// debugJSON serves GET /debug/tpsroute.
func (g *gateway) debugJSON(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, g.view())
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "gateway: encode: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// authorized reports whether r carries one of tokens as a bearer token (or
// as x-api-key, the header Anthropic's SDKs send on /v1/messages). The
// comparison takes the same time whatever the token.
func authorized(r *http.Request, tokens []string) bool {
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || got == "" {
		// Anthropic's SDKs send their key as x-api-key.
		if got = r.Header.Get("X-Api-Key"); got == "" {
			return false
		}
	}
	match := 0
	for _, t := range tokens {
		match |= subtle.ConstantTimeCompare([]byte(got), []byte(t))
	}
	return match == 1
}
