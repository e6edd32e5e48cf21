package executor

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestConcurrencyRule walks the learnt limit through 429s and successes:
// what each learns, and whether the deployment is full after it.
func TestConcurrencyRule(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	type step struct {
		at       time.Duration // since t0
		kind     byte          // 'l' a 429 (limited), 'a' a success (admitted), 'f' a check (full)
		others   int64         // limited, admitted: our other calls in flight; full: in flight
		ra       time.Duration // limited: Retry-After
		want     bool          // limited: read as a concurrency 429; full: full
		wantBack time.Duration // full: when to come back, since t0 (0: none)
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"none_learnt_never_full", []step{
			{kind: 'f', others: 1000},
		}},
		{"alone_is_a_rate_limit", []step{
			{kind: 'l', others: 0, ra: 5 * time.Second, want: false},
			{kind: 'f', others: 1},
		}},
		{"negative_others_learn_nothing", []step{
			{kind: 'l', others: -3, ra: time.Second, want: false},
			{kind: 'f', others: 5},
		}},
		{"held_at_limit_until_retry_after", []step{
			{kind: 'l', others: 2, ra: 3 * time.Second, want: true},
			{kind: 'f', others: 1},
			{kind: 'f', others: 2, want: true, wantBack: 3 * time.Second},
			{at: 2999 * time.Millisecond, kind: 'f', others: 2, want: true, wantBack: 3 * time.Second},
		}},
		{"one_above_after_retry_after", []step{
			{kind: 'l', others: 2, ra: 3 * time.Second, want: true},
			{at: 3 * time.Second, kind: 'f', others: 2},
			{at: 3 * time.Second, kind: 'f', others: 3, want: true, wantBack: 6 * time.Second},
		}},
		{"probe_refused_keeps_limit", []step{
			{kind: 'l', others: 2, ra: time.Second, want: true},
			{at: 2 * time.Second, kind: 'l', others: 2, ra: time.Second, want: true},
			{at: 2 * time.Second, kind: 'f', others: 2, want: true, wantBack: 3 * time.Second},
		}},
		{"success_at_limit_raises_it", []step{
			{kind: 'l', others: 2, ra: time.Second, want: true},
			{at: 2 * time.Second, kind: 'a', others: 2},
			{at: 2 * time.Second, kind: 'f', others: 3},
			{at: 2 * time.Second, kind: 'a', others: 3},
			{at: 2 * time.Second, kind: 'f', others: 4},
			{at: 2 * time.Second, kind: 'f', others: 5, want: true, wantBack: 3 * time.Second},
		}},
		{"success_below_limit_changes_nothing", []step{
			{kind: 'l', others: 3, ra: time.Second, want: true},
			{kind: 'a', others: 2},
			{kind: 'f', others: 3, want: true, wantBack: time.Second},
		}},
		{"lower_limit_replaces_higher", []step{
			{kind: 'l', others: 4, ra: time.Second, want: true},
			{kind: 'l', others: 1, ra: time.Second, want: true},
			{kind: 'f', others: 1, want: true, wantBack: time.Second},
		}},
		{"expires_after_ttl", []step{
			{kind: 'l', others: 1, ra: time.Second, want: true},
			{at: limitTTL, kind: 'f', others: 2, want: true, wantBack: limitTTL + time.Second},
			{at: limitTTL + time.Nanosecond, kind: 'f', others: 100},
		}},
		{"expired_not_revived_by_a_success", []step{
			{kind: 'l', others: 1, ra: time.Second, want: true},
			{at: limitTTL + time.Second, kind: 'a', others: 5},
			{at: limitTTL + time.Second, kind: 'f', others: 100},
			{at: limitTTL + time.Second, kind: 'a', others: 100},
			{at: limitTTL + time.Second, kind: 'f', others: 1000},
		}},
		{"success_without_limit_learns_nothing", []step{
			{kind: 'a', others: 3},
			{kind: 'f', others: 1000},
		}},
		{"negative_retry_after_probes_at_once", []step{
			{kind: 'l', others: 2, ra: -time.Hour, want: true},
			{kind: 'f', others: 2},
			{kind: 'f', others: 3, want: true, wantBack: time.Millisecond},
		}},
		{"huge_retry_after_capped_at_ttl", []step{
			{kind: 'l', others: 2, ra: math.MaxInt64, want: true},
			{kind: 'f', others: 2, want: true, wantBack: limitTTL},
		}},
		{"huge_others", []step{
			{kind: 'l', others: math.MaxInt64, ra: time.Second, want: true},
			{kind: 'f', others: math.MaxInt64 - 1},
			{kind: 'a', others: math.MaxInt64}, // cannot rise: no overflow
			{kind: 'f', others: math.MaxInt64, want: true, wantBack: time.Second},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c concurrency
			for i, s := range tt.steps {
				now := t0.Add(s.at)
				switch s.kind {
				case 'l':
					assert.Equal(t, s.want, c.limited(now, s.others, s.ra), "step %d", i)
				case 'a':
					c.admitted(now, s.others)
				case 'f':
					full, back, _ := c.full(now, s.others)
					assert.Equal(t, s.want, full, "step %d: full", i)
					if s.wantBack == 0 {
						assert.True(t, back.IsZero(), "step %d: no time to come back", i)
					} else {
						assert.Equal(t, t0.Add(s.wantBack), back, "step %d: back at", i)
					}
				}
			}
		})
	}
}

// BenchmarkHeadroom is the cost a pick pays per candidate (Status) for the
// learnt limit on top of the limiters.
// TestLearntFlagCleared: once a learnt limit is forgotten (limitTTL with
// neither a 429 nor a success that set it), the admission check clears the
// flag that makes it take the key's lock, and checks after it take none.
func TestLearntFlagCleared(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	var st keyState
	st.conc.limited(now, 2, time.Second)
	st.learnt.Store(true)
	st.inFlight.Store(2)
	ok, _, full := st.headroom(now, 1)
	assert.False(t, ok)
	assert.True(t, full, "full at the learnt limit")
	assert.True(t, st.learnt.Load(), "kept while the limit lasts")
	later := now.Add(limitTTL + time.Second)
	ok, _, full = st.headroom(later, 1)
	assert.True(t, ok, "forgotten after limitTTL")
	assert.False(t, full)
	assert.False(t, st.learnt.Load(), "cleared once forgotten")
}

func BenchmarkHeadroom(b *testing.B) {
	now := time.Unix(1_000_000, 0)
	for _, learnt := range []bool{false, true} {
		b.Run(map[bool]string{false: "none", true: "learnt"}[learnt], func(b *testing.B) {
			var st keyState
			if learnt {
				st.conc.limited(now, 2, time.Second)
				st.learnt.Store(true)
			}
			st.inFlight.Store(1)
			b.ReportAllocs()
			for b.Loop() {
				st.headroom(now, 1)
			}
		})
	}
}
