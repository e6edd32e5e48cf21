package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tpsroute/tpsroute/route"
)

// ANSI colours, used only when stdout is a terminal.
const (
	bold   = "\x1b[1m"
	dim    = "\x1b[2m"
	red    = "\x1b[31m"
	green  = "\x1b[32m"
	yellow = "\x1b[33m"
	reset  = "\x1b[0m"
)

// paint wraps s in colour c when colours are on.
func (s *sim) paint(c, str string) string {
	if !s.cfg.Color || str == "" {
		return str
	}
	return c + str + reset
}

func secs(d time.Duration) string { return fmt.Sprintf("%.1fs", d.Seconds()) }

// legend describes the simulated providers and the script before the run.
func (s *sim) legend() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n\n", s.paint(bold, fmt.Sprintf(
		"tpsroute quickstart: %d simulated providers of %s, policy %s, %d calls in flight for %s",
		len(s.sims), model, s.cfg.Policy, s.cfg.Concurrency, s.cfg.Duration)))
	fmt.Fprintf(&b, "%-18s %6s %6s %8s  %s\n", "deployment", "ttft", "tok/s", "$/M out", "behaviour")
	for _, p := range s.sims {
		fmt.Fprintf(&b, "%-18s %6s %6.0f %8.2f  %s\n", p.Label(), p.TTFT, p.TPS, p.Price.Output, p.Reliability)
	}
	b.WriteString("\nscript:\n")
	for _, e := range s.tl.events() {
		fmt.Fprintf(&b, "  at %5s  %s\n", secs(e.At), e.What)
	}
	b.WriteString("\n")
	return b.String()
}

// table renders one live table: each deployment's share of the calls
// committed since the last table, its measured TTFT and TPS, its errors and
// its breaker state. It also returns the lines for the events (scripted, and
// breaker changes) since the last table.
func (s *sim) table(elapsed time.Duration) (string, []string) {
	s.mu.Lock()
	by, n := s.tickBy, s.tickN
	s.tickBy, s.tickN = map[string]int{}, 0
	notes := s.breakers
	s.breakers = nil
	var events []event
	for _, e := range s.tl.events()[s.events:] {
		if e.At > elapsed {
			break
		}
		events = append(events, e)
		s.events++
	}
	s.mu.Unlock()

	stats := s.client.Stats()
	now := time.Now()
	var b strings.Builder
	b.WriteString(s.paint(bold, fmt.Sprintf("t=%-5s %d calls started in the last %s", secs(elapsed), n, s.cfg.Tick)) + "\n")
	// Fixed widths, padded before colouring, so escape codes do not shift columns.
	const row = "%-18s %6s %9s %9s %8s %7s %10s\n"
	fmt.Fprintf(&b, row, "deployment", "share", "ttft p50", "ttft p95", "tps p50", "errors", "breaker")
	for _, l := range s.labels {
		k := s.keys[l]
		share := "-"
		if n > 0 {
			share = fmt.Sprintf("%.0f%%", 100*float64(by[l])/float64(n))
		}
		ttft50, ttft95, tps50, errs := "-", "-", "-", "0"
		if st, ok := stats.Lookup(k); ok {
			if st.TTFT.Count > 0 {
				ttft50, ttft95 = fmt.Sprintf("%.2fs", st.TTFT.P50), fmt.Sprintf("%.2fs", st.TTFT.P95)
			}
			if st.TPS.Count > 0 {
				tps50 = fmt.Sprintf("%.0f", st.TPS.P50)
			}
			errs = fmt.Sprint(st.Errors)
		}
		state := s.client.Status(k)
		breaker := fmt.Sprintf("%10s", state.Breaker)
		switch {
		case state.Breaker == route.BreakerOpen:
			breaker = s.paint(red, breaker)
		case state.Breaker == route.BreakerHalfOpen:
			breaker = s.paint(yellow, breaker)
		case state.CoolingUntil.After(now):
			breaker = s.paint(yellow, fmt.Sprintf("%10s", "cooling"))
		}
		share = fmt.Sprintf("%6s", share)
		if n > 0 && by[l]*2 > n {
			share = s.paint(green, share)
		}
		fmt.Fprintf(&b, row, l, share, ttft50, ttft95, tps50, errs, breaker)
	}
	var lines []string
	for _, e := range events {
		lines = append(lines, s.paint(yellow, fmt.Sprintf("  >> %5s  %s", secs(e.At), e.What)))
	}
	for _, l := range notes {
		lines = append(lines, s.paint(dim, "  >> "+l))
	}
	return b.String(), lines
}

// summary renders where the traffic went in each phase and why, and the
// machine-checkable totals line.
func (s *sim) summary(r *result, elapsed time.Duration) string {
	var b strings.Builder
	b.WriteString(s.paint(bold, fmt.Sprintf("Summary: policy %s, %s, %d calls in flight", s.cfg.Policy, secs(elapsed), s.cfg.Concurrency)) + "\n\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "phase\ttime\tcalls\tmost traffic\trouter's first choice at the end of the phase, and why")
	for _, p := range r.Phases {
		top, share := p.Top()
		most := "-"
		if top != "" {
			most = fmt.Sprintf("%s %.0f%%", top, 100*share)
		}
		fmt.Fprintf(tw, "%s\t%s-%s\t%d\t%s\t%s\n", p.Name, secs(p.From), secs(p.To), p.Calls, most, s.why(p))
	}
	tw.Flush()

	b.WriteString("\nanswered calls by deployment and phase:\n")
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "deployment\t")
	for _, p := range r.Phases {
		fmt.Fprintf(tw, "%s\t", p.Name)
	}
	fmt.Fprintln(tw)
	for _, l := range r.Labels {
		fmt.Fprintf(tw, "%s\t", l)
		for _, p := range r.Phases {
			fmt.Fprintf(tw, "%d\t", p.ByLabel[l])
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()

	fmt.Fprintf(&b, "\nfailed over: answered by another deployment after a failed attempt (503, 500, 429), before any token reached the caller\n")
	fmt.Fprintf(&b, "retried: answered by the same deployment on a second attempt\n")
	fmt.Fprintf(&b, "continued: cut mid-answer, resumed on another deployment; the caller read one complete answer\n")
	s.mu.Lock()
	for _, f := range s.failures {
		fmt.Fprintf(&b, "lost call: %s\n", f)
	}
	s.mu.Unlock()
	if r.Interrupted > 0 {
		fmt.Fprintf(&b, "interrupted: %d calls cancelled by the caller\n", r.Interrupted)
	}
	line := fmt.Sprintf("calls: %d  answered: %d  lost: %d  failed over: %d  retried: %d  continued: %d",
		r.Calls, r.Answered, r.Lost, r.FailedOver, r.Retried, r.Continued)
	c := green
	if r.Lost > 0 {
		c = red
	}
	b.WriteString("\n" + s.paint(c, line) + "\n")
	return b.String()
}

// why explains the router's choice at the end of phase p (phaseResult.Choice):
// the deployment it put first and the reason, the policy's metric against the
// best alternative, and the breakers seen open or half-open.
func (s *sim) why(p phaseResult) string {
	plan := p.Choice()
	if len(plan.Deployments) == 0 {
		return ""
	}
	first := &plan.Deployments[0]
	var alt *route.Candidate
	for i := range plan.Deployments[1:] {
		c := &plan.Deployments[1+i]
		if !c.Demoted && c.Expected.OK && (alt == nil || s.better(c, alt)) {
			alt = c
		}
	}
	out := label(first.Key()) + " (" + first.Reason + ")"
	if m := s.metric(first); m != "" {
		out += ": " + m
		if alt != nil {
			out += " vs " + s.metric(alt) + " at " + label(alt.Key())
		}
	}
	if len(p.openSeen) > 0 {
		out += "; breaker open during the phase: " + strings.Join(slices.Sorted(maps.Keys(p.openSeen)), ", ")
	}
	var half []string
	for _, c := range plan.Deployments {
		if c.Reason == route.ReasonHalfOpen || c.Reason == route.ReasonHalfOpenProbe {
			half = append(half, label(c.Key()))
		}
	}
	if len(half) > 0 {
		out += "; half-open at its end (probing): " + strings.Join(half, ", ")
	}
	return out
}

// metric renders the policy's metric of c, as the router saw it.
func (s *sim) metric(c *route.Candidate) string {
	switch s.cfg.Policy {
	case route.Latency:
		if c.Expected.TTFTOK {
			return fmt.Sprintf("ttft %.2fs", c.Expected.TTFT)
		}
	case route.Cost:
		return fmt.Sprintf("$%.2f per 1k calls", 1000*c.Cost)
	default:
		if c.Expected.TPSOK {
			return fmt.Sprintf("%.0f tok/s", c.Expected.TPS)
		}
	}
	return ""
}

// better reports whether a beats b on the policy's metric.
func (s *sim) better(a, b *route.Candidate) bool {
	switch s.cfg.Policy {
	case route.Latency:
		return a.Expected.TTFTOK && (!b.Expected.TTFTOK || a.Expected.TTFT < b.Expected.TTFT)
	case route.Cost:
		return a.Cost < b.Cost
	default:
		return a.Expected.TPSOK && (!b.Expected.TPSOK || a.Expected.TPS > b.Expected.TPS)
	}
}
