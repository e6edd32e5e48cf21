package main

import (
	"bytes"
	"context"
	"regexp"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/tpsroute/tpsroute/route"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// tableHeader starts each live table.
var tableHeader = regexp.MustCompile(`t=\d+\.\ds +\d+ calls started`)

// summaryLine is the machine-checkable last line CI greps for.
var summaryLine = regexp.MustCompile(`(?m)^calls: (\d+)  answered: (\d+)  lost: 0  failed over: (\d+)  retried: (\d+)  continued: (\d+)$`)

// TestRunThroughput runs the full 25 s simulation in virtual time (synctest,
// in-memory providers) and checks what the quickstart promises: no call lost,
// failovers during the outage, traffic away from the slowed provider and from
// the region that is down.
func TestRunThroughput(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out bytes.Buffer
		res, err := run(context.Background(), config{Policy: route.Throughput, Duration: 25 * time.Second, Concurrency: 12, InMemory: true}, &out)
		require.NoError(t, err)

		assert.Positive(t, res.Calls)
		assert.Equal(t, res.Calls, res.Answered, "every call answered")
		assert.Zero(t, res.Lost)
		assert.Positive(t, res.FailedOver, "the outage makes calls fail over")
		assert.Regexp(t, summaryLine, out.String())

		healthy, slow, outage := res.Phases[0], res.Phases[1], res.Phases[2]
		// Before the slowdown groq is the fastest and the router's choice;
		// after it, fireworks is, and takes most of the traffic.
		assert.Equal(t, "groq/us-east", label(healthy.Choice().Deployments[0].Key()))
		assert.Equal(t, "fireworks/eu-west", label(slow.Choice().Deployments[0].Key()))
		top, share := slow.Top()
		assert.Equal(t, "fireworks/eu-west", top)
		assert.Greater(t, share, 0.5)
		assert.Less(t, fraction(slow, "groq/us-east"), 0.35, "traffic moved away from the slowed provider")
		// During the outage no call started there is answered in eu-west.
		assert.Zero(t, outage.ByLabel["fireworks/eu-west"]+outage.ByLabel["deepinfra/eu-west"])
		assert.True(t, outage.openSeen["fireworks/eu-west"], "the eu-west breaker opened")

		// Once eu-west is back, its half-open breakers get their probes
		// (route puts a half-open deployment first now and then), and within
		// the 6 s the run has left the region answers calls again and its
		// fastest deployment, fireworks, is the router's first choice again
		// (it was measured before the outage: route ranks it on that, and
		// exploration re-measures it). Whether every eu-west breaker has
		// closed by the end of the run is a matter of a few hundred
		// milliseconds; the README says no more than this.
		back := res.Phases[3]
		assert.Positive(t, back.ByLabel["fireworks/eu-west"]+back.ByLabel["deepinfra/eu-west"], "the recovered region takes traffic again")
		assert.Equal(t, "fireworks/eu-west", label(back.Choice().Deployments[0].Key()), "the recovered region wins traffic back")
		backLine := regexp.MustCompile(`(?m)^eu-west back .*$`).FindString(out.String())
		require.NotEmpty(t, backLine, "the summary's last phase")
	})
}

// TestRunPolicies checks each policy's choice once groq has slowed down
// (before the outage), with no call lost, over the README's default 25 s
// (virtual time; the slowdown phase lasts 6.25 s). With one cold probe per
// deployment at a time, throughput's switch needs a slowdown phase of about
// 4.5 s (a run of 18 s): a 15 s run ended it with groq still first.
func TestRunPolicies(t *testing.T) {
	tests := []struct {
		policy route.Policy
		want   string // the router's first choice at the end of the slowdown phase
	}{
		{route.Throughput, "fireworks/eu-west"},
		{route.Latency, "deepinfra/eu-west"},
		{route.Cost, "deepinfra/eu-west"},
	}
	for _, tt := range tests {
		t.Run(tt.policy.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var out bytes.Buffer
				res, err := run(context.Background(), config{Policy: tt.policy, Duration: 25 * time.Second, Concurrency: 6, InMemory: true}, &out)
				require.NoError(t, err)
				assert.Zero(t, res.Lost, out.String())
				assert.Equal(t, res.Calls, res.Answered)
				require.NotEmpty(t, res.Phases[1].Choice().Deployments)
				assert.Equal(t, tt.want, label(res.Phases[1].Choice().Deployments[0].Key()))
				assert.Contains(t, out.String(), "policy "+tt.policy.String())
			})
		})
	}
}

// TestRunOutputModes checks that plain output (not a terminal) has no ANSI
// escape codes and keeps every table, and that the live view redraws in place.
func TestRunOutputModes(t *testing.T) {
	tests := []struct {
		name        string
		color, live bool
		escapes     bool
	}{
		{"plain", false, false, false},
		{"live without colour", false, true, true},
		{"live with colour", true, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var out bytes.Buffer
				_, err := run(context.Background(), config{Policy: route.Cost, Duration: 3 * time.Second, Concurrency: 2,
					InMemory: true, Color: tt.color, Live: tt.live}, &out)
				require.NoError(t, err)
				assert.Equal(t, tt.escapes, bytes.Contains(out.Bytes(), []byte("\x1b[")))
				assert.Equal(t, tt.live, bytes.Contains(out.Bytes(), []byte("\x1b[J")), "redraw")
				assert.Equal(t, tt.color, bytes.Contains(out.Bytes(), []byte(bold)), "colour")
				// One table per tick: 3 s of traffic, then the calls in flight end.
				assert.GreaterOrEqual(t, len(tableHeader.FindAll(out.Bytes(), -1)), 3)
				assert.Contains(t, out.String(), "eu-west outage: fireworks and deepinfra answer 503")
			})
		})
	}
}

// TestRunOverTCP runs a short simulation against real 127.0.0.1 servers, as
// `go run` does.
func TestRunOverTCP(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 2 s of wall-clock traffic")
	}
	var out bytes.Buffer
	res, err := run(context.Background(), config{Policy: route.Throughput, Duration: 2 * time.Second, Concurrency: 4}, &out)
	require.NoError(t, err)
	assert.Positive(t, res.Calls)
	assert.Equal(t, res.Calls, res.Answered)
	assert.Regexp(t, summaryLine, out.String())
}

func TestRunRejectsBadConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  config
	}{
		{"zero duration", config{Concurrency: 1}},
		{"zero concurrency", config{Duration: time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := run(context.Background(), tt.cfg, &bytes.Buffer{})
			assert.ErrorContains(t, err, "quickstart:")
		})
	}
}

func TestParsePolicy(t *testing.T) {
	for _, p := range []route.Policy{route.Throughput, route.Latency, route.Cost} {
		got, err := parsePolicy(p.String())
		require.NoError(t, err)
		assert.Equal(t, p, got)
	}
	_, err := parsePolicy("fastest")
	assert.ErrorContains(t, err, "unknown policy")
}

// fraction returns label's share of the calls answered in p.
func fraction(p phaseResult, label string) float64 {
	total := 0
	for _, n := range p.ByLabel {
		total += n
	}
	if total == 0 {
		return 0
	}
	return float64(p.ByLabel[label]) / float64(total)
}
