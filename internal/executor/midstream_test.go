package executor_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/openai/openai-go/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/fallback"
	"github.com/tpsroute/tpsroute/internal/executor"
	"github.com/tpsroute/tpsroute/replay"
	"github.com/tpsroute/tpsroute/route"
)

// sseEvent frames one data event.
func sseEvent(data string) string { return "data: " + data + "\n\n" }

// wordEvent is an output chunk carrying text, in the tokens of replay.Text.
func wordEvent(i int) string {
	return sseEvent(fmt.Sprintf(`{"choices":[{"index":0,"delta":{"content":"w%d "}}]}`, i))
}

const (
	roleEvent      = `data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}` + "\n\n"
	finishEvent    = `data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n"
	doneEvent      = "data: [DONE]\n\n"
	malformedEvent = `data: {"choices":[{"index":0,"delta":{"content":"w` + "\n\n"
)

// canonical returns the events of a clean answer of replay.Text(k).
func canonical(k int) []string {
	ev := []string{roleEvent}
	for i := range k {
		ev = append(ev, wordEvent(i))
	}
	return append(ev, finishEvent, doneEvent)
}

// rawCassette plays writes, each one Write on the wire (so one Read on the
// client side of replay's in-memory pipe), 1 ms apart, then ends with end
// ("eof", "reset" or "hang").
func rawCassette(end string, writes ...string) *replay.Cassette {
	c := &replay.Cassette{Version: replay.CassetteVersion}
	c.Response.Status = 200
	c.Response.End = end
	for i, w := range writes {
		w := w
		c.Response.Events = append(c.Response.Events, replay.Event{AtMS: float64(i), Raw: &w})
	}
	return c
}

// prefillDep is dep with assistant prefill declared.
func prefillDep(provider, wire string) route.Deployment {
	d := dep(provider, wire)
	d.Capabilities.AssistantPrefill = true
	return d
}

// TestContinuationPrefillIsDeliveredText reproduces issue 13 point 2: words
// 0-8 as separate events, then one write holding word 9, an event that is not
// JSON and word 10. The continuation must resume from exactly what the
// caller read: nothing read but undelivered lost (words missing) or resent
// (words repeated).
func TestContinuationPrefillIsDeliveredText(t *testing.T) {
	const n = 20
	writes := []string{roleEvent}
	for i := range 9 {
		writes = append(writes, wordEvent(i))
	}
	writes = append(writes, wordEvent(9)+malformedEvent+wordEvent(10))
	for _, tt := range []struct {
		name string
		opts fallback.Options
	}{
		// The malformed event fails the stream: word 10, after it, is never
		// delivered, and word 9, before it in the same read, is.
		{"malformed_fails", fallback.Options{MidStream: fallback.MidStreamContinue, Malformed: fallback.MalformedFail}},
		// The malformed event is skipped; the stream is then cut.
		{"malformed_skipped_then_cut", fallback.Options{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(map[string]replay.Script{
					"a-m": rawCassette("reset", writes...),
					"b-m": prof(n),
				}, tt.opts)
				res, err := e.do(t, planOf(prefillDep("a", "a-m"), prefillDep("b", "b-m")), executor.Call{Stream: true})
				require.NoError(t, err)
				d := drain(t, res.Body)
				require.NoError(t, d.err)
				assert.Equal(t, replay.Text(n), d.text)
				assert.Equal(t, "b", res.Deployment().Provider)
				require.Len(t, attemptsFor(e.h, "b-m"), 1)
				assert.Equal(t, "assistant", attemptsFor(e.h, "b-m")[0].LastRole)
			})
		})
	}
}

// streamFault is one fault of the splice property test.
type streamFault string

const (
	faultCut       streamFault = "cut"            // clean EOF in the middle of the event
	faultCutLine   streamFault = "cut-line"       // clean EOF after the event's data line, before its blank line
	faultReset     streamFault = "reset"          // connection aborted before the event
	faultStall     streamFault = "stall"          // silence forever in the middle of the event
	faultMalformed streamFault = "malformed"      // a non-JSON event inserted before the event
	faultBadFail   streamFault = "malformed-fail" // the same under MalformedFail
)

// faulted returns the primary's bytes with f injected at event j, and how the
// body ends.
func faulted(ev []string, f streamFault, j int) (body, end string) {
	pre := strings.Join(ev[:j], "")
	switch f {
	case faultCut:
		return pre + ev[j][:len(ev[j])/2], "eof"
	case faultCutLine:
		return pre + ev[j][:len(ev[j])-1], "eof"
	case faultReset:
		return pre, "reset"
	case faultStall:
		return pre + ev[j][:len(ev[j])/2], "hang"
	default:
		return pre + malformedEvent + strings.Join(ev[j:], ""), "eof"
	}
}

// TestSpliceProperty is issue 13's property test of byte-exact splicing: the
// primary's stream is split into two reads at every byte offset, each fault
// is injected at every event, with continuation on and off. On success the
// caller's text is the canonical text; on error it is a prefix of it. With
// continuation on (and a healthy, prefill-capable deployment of the same
// model behind) every call succeeds. The "one" plans run the same matrix
// with a single deployment, which answers its second request cleanly: the
// continuation goes back to the deployment that was cut (issue 29 item 1).
func TestSpliceProperty(t *testing.T) {
	const words = 4
	ev := canonical(words)
	want := replay.Text(words)
	policies := []struct {
		name string
		mid  fallback.MidStreamPolicy
	}{{"continue", fallback.MidStreamDefault}, {"error", fallback.MidStreamError}}
	// setups return the scripts and plan of one run whose primary plays
	// the faulted writes.
	setups := []struct {
		name string
		make func(faulty replay.Script) (map[string]replay.Script, route.Plan)
	}{
		{"two", func(faulty replay.Script) (map[string]replay.Script, route.Plan) {
			return map[string]replay.Script{"a-m": faulty, "b-m": prof(words)}, planOf(prefillDep("a", "a-m"), prefillDep("b", "b-m"))
		}},
		{"one", func(faulty replay.Script) (map[string]replay.Script, route.Plan) {
			s := replay.Func(func(c replay.Call) replay.Script {
				if c.Attempt == 1 {
					return faulty
				}
				return prof(words)
			})
			return map[string]replay.Script{"a-m": s}, planOf(prefillDep("a", "a-m"))
		}},
	}
	for _, f := range []streamFault{faultCut, faultCutLine, faultReset, faultStall, faultMalformed, faultBadFail} {
		for _, p := range policies {
			for _, su := range setups {
				t.Run(string(f)+"/"+p.name+"/"+su.name, func(t *testing.T) {
					synctest.Test(t, func(t *testing.T) {
						runs, fails := 0, 0
						for j := range ev {
							body, end := faulted(ev, f, j)
							step := 1
							if testing.Short() {
								step = 5 // every fifth read boundary
							}
							for k := 0; k < len(body); k += step {
								writes := []string{body[:k], body[k:]}
								if k == 0 {
									writes = writes[1:]
								}
								opts := fallback.Options{MidStream: p.mid}
								if f == faultBadFail {
									opts.Malformed = fallback.MalformedFail
								}
								scripts, plan := su.make(rawCassette(end, writes...))
								e := newEnv(scripts, opts)
								where := fmt.Sprintf("fault %s at event %d, read boundary %d", f, j, k)
								res, err := e.do(t, plan, executor.Call{Stream: true})
								runs++
								if err != nil {
									fails++
									// Before the commit point (nothing was
									// delivered) a lone deployment's failure is
									// not retried: that is failover, not
									// continuation.
									require.False(t, p.name == "continue" && su.name == "two", "%s: %v", where, err)
									continue
								}
								d := drain(t, res.Body)
								if d.err == nil {
									require.Equal(t, want, d.text, where)
									continue
								}
								fails++
								require.True(t, strings.HasPrefix(want, d.text), "%s: %q is not a prefix", where, d.text)
								require.NotEqual(t, "continue", p.name, "%s: %v", where, d.err)
							}
						}
						t.Logf("%d runs, %d errors", runs, fails)
					})
				})
			}
		}
	}
}

// TestMalformedEvent: one malformed data event in a healthy stream is
// skipped, removed from what the caller reads and counted; the third in one
// stream, or any under MalformedFail, fails it (issue 13 point 3).
func TestMalformedEvent(t *testing.T) {
	const words = 6
	ev := canonical(words)
	// with returns the canonical stream with a malformed event inserted
	// before each of the given events, one write per event.
	with := func(at ...int) []string {
		var w []string
		for i, s := range ev {
			for _, a := range at {
				if a == i {
					w = append(w, malformedEvent)
				}
			}
			w = append(w, s)
		}
		return w
	}
	run := func(t *testing.T, opts fallback.Options, writes []string, plan route.Plan) (drained, *executor.Result) {
		e := newEnv(map[string]replay.Script{"a-m": rawCassette("eof", writes...), "b-m": prof(words)}, opts)
		res, err := e.do(t, plan, executor.Call{Stream: true})
		require.NoError(t, err)
		return drain(t, res.Body), res
	}
	a := dep("a", "a-m")
	t.Run("after_first_output_skipped_and_counted", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			d, res := run(t, fallback.Options{}, with(3), planOf(a))
			require.NoError(t, d.err)
			assert.Equal(t, replay.Text(words), d.text)
			assert.Equal(t, len(ev)-1, d.chunks, "the caller never sees the malformed event")
			assert.EqualValues(t, 1, res.Sample().Malformed)
		})
	})
	t.Run("before_first_output_skipped", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			d, res := run(t, fallback.Options{}, with(0), planOf(a, dep("b", "b-m")))
			require.NoError(t, d.err)
			assert.Equal(t, replay.Text(words), d.text)
			assert.Equal(t, "a", res.Deployment().Provider)
			assert.EqualValues(t, 1, res.Sample().Malformed)
		})
	})
	t.Run("two_skipped", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			d, res := run(t, fallback.Options{}, with(2, 4), planOf(a))
			require.NoError(t, d.err)
			assert.Equal(t, replay.Text(words), d.text)
			assert.EqualValues(t, 2, res.Sample().Malformed)
		})
	})
	t.Run("third_fails", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			d, _ := run(t, fallback.Options{MidStream: fallback.MidStreamError}, with(2, 3, 5), planOf(a))
			require.ErrorIs(t, d.err, fallback.ErrMalformed)
			assert.ErrorIs(t, d.err, fallback.ErrMidStream)
			// Everything before the third malformed event was delivered.
			assert.Equal(t, "w0 w1 w2 w3 ", d.text)
		})
	})
	t.Run("fail_policy_fails_at_first", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			d, _ := run(t, fallback.Options{MidStream: fallback.MidStreamError, Malformed: fallback.MalformedFail}, with(3), planOf(a))
			require.ErrorIs(t, d.err, fallback.ErrMalformed)
			assert.Equal(t, "w0 w1 ", d.text)
		})
	})
	t.Run("third_before_output_fails_over", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			d, res := run(t, fallback.Options{}, with(0, 0, 0), planOf(a, dep("b", "b-m")))
			require.NoError(t, d.err)
			assert.Equal(t, replay.Text(words), d.text)
			assert.Equal(t, "b", res.Deployment().Provider)
		})
	})
}

// TestWildcardModelCapabilities: a wildcard deployment's per-model
// capabilities decide whether it is offered a continuation (issue 13 point 7).
func TestWildcardModelCapabilities(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(map[string]replay.Script{
			"a-m": replay.WithFaults(prof(40), replay.CutAfter(10)),
			"m":   prof(40),
		}, fallback.Options{})
		w := route.Deployment{Provider: "w", Model: route.Wildcard, BaseURL: "http://w.test/v1",
			Capabilities:      route.Capabilities{AssistantPrefill: true},
			ModelCapabilities: map[string]route.Capabilities{"m": {CacheControl: true}}}
		// As the picker makes it concrete for model "m".
		wm := w.ForModel("m")
		require.False(t, wm.Capabilities.AssistantPrefill)
		res, err := e.do(t, planOf(prefillDep("a", "a-m"), wm), executor.Call{Stream: true})
		require.NoError(t, err)
		d := drain(t, res.Body)
		require.ErrorIs(t, d.err, fallback.ErrMidStream, "the original mid-stream error")
		assert.Empty(t, attemptsFor(e.h, "m"), "no continuation where the model has no prefill")
	})
}

// TestPrefillRejectionRemembered: a deployment that rejects a prefill with a
// 400 naming the assistant message is not offered a continuation again, and
// the caller gets the original mid-stream error cleanly (issue 13 point 7).
func TestPrefillRejectionRemembered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(map[string]replay.Script{
			"a-m": replay.WithFaults(prof(40), replay.CutAfter(10)),
			"b-m": replay.WithFaults(prof(40), replay.RejectPrefill()),
		}, fallback.Options{})
		// a declares no prefill, so that b is the only continuation target.
		plan := planOf(dep("a", "a-m"), prefillDep("b", "b-m"))
		for call := range 3 {
			res, err := e.do(t, plan, executor.Call{Stream: true})
			require.NoError(t, err)
			d := drain(t, res.Body)
			require.ErrorIs(t, d.err, fallback.ErrMidStream, "call %d", call)
			var api *openai.Error
			assert.False(t, errors.As(d.err, &api), "never the prefill's 400")
			var fe *fallback.Error
			require.ErrorAs(t, d.err, &fe)
			last, _ := fe.Last()
			assert.Equal(t, "a", last.Key.Provider)
		}
		assert.Len(t, attemptsFor(e.h, "b-m"), 1, "one rejected prefill, then never offered again")
	})
}

// TestDefaultContinuesOnSameModel: by default a stream cut after the commit
// point continues on a deployment of the same logical model that declares
// assistant prefill, and never on another model (issue 13 point 8).
func TestDefaultContinuesOnSameModel(t *testing.T) {
	cut := func() map[string]replay.Script {
		return map[string]replay.Script{"a-m": replay.WithFaults(prof(40), replay.CutAfter(10)), "b-m": prof(40), "o-m": prof(40)}
	}
	t.Run("same_model_continues", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(cut(), fallback.Options{})
			res, err := e.do(t, planOf(dep("a", "a-m"), prefillDep("b", "b-m")), executor.Call{Stream: true})
			require.NoError(t, err)
			d := drain(t, res.Body)
			require.NoError(t, d.err)
			assert.Equal(t, replay.Text(40), d.text)
			assert.Equal(t, "b", res.Deployment().Provider)
		})
	})
	t.Run("other_model_is_opt_in", func(t *testing.T) {
		other := prefillDep("o", "o-m")
		other.Model = "other"
		for _, tt := range []struct {
			name string
			mid  fallback.MidStreamPolicy
			ok   bool
		}{{"default", fallback.MidStreamDefault, false}, {"continue", fallback.MidStreamContinue, true}} {
			t.Run(tt.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					e := newEnv(cut(), fallback.Options{MidStream: tt.mid})
					res, err := e.do(t, planOf(dep("a", "a-m"), other), executor.Call{Stream: true})
					require.NoError(t, err)
					d := drain(t, res.Body)
					if !tt.ok {
						require.ErrorIs(t, d.err, fallback.ErrMidStream)
						assert.Empty(t, attemptsFor(e.h, "o-m"))
						return
					}
					require.NoError(t, d.err)
					assert.Equal(t, replay.Text(40), d.text)
				})
			})
		}
	})
	t.Run("error_policy_never_continues", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(cut(), fallback.Options{MidStream: fallback.MidStreamError})
			res, err := e.do(t, planOf(dep("a", "a-m"), prefillDep("b", "b-m")), executor.Call{Stream: true})
			require.NoError(t, err)
			d := drain(t, res.Body)
			require.ErrorIs(t, d.err, fallback.ErrMidStream)
			assert.Empty(t, attemptsFor(e.h, "b-m"))
		})
	})
}

// TestFailedContinuationCounted: a continuation that was sent and failed
// (here, a rejected prefill) counts in the error's attempt total, as it does
// in Result.AttemptCount, so the error, the gateway's header and its log
// agree; the deciding attempt stays the original mid-stream failure.
func TestFailedContinuationCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(map[string]replay.Script{
			"a-m": replay.WithFaults(prof(40), replay.CutAfter(10)),
			"b-m": replay.WithFaults(prof(40), replay.RejectPrefill()),
		}, fallback.Options{MidStream: fallback.MidStreamContinue})
		res, err := e.do(t, planOf(dep("a", "a-m"), prefillDep("b", "b-m")), executor.Call{Stream: true})
		require.NoError(t, err)
		d := drain(t, res.Body)
		require.ErrorIs(t, d.err, fallback.ErrMidStream)
		require.ErrorIs(t, d.err, fallback.ErrContinuation)
		var fe *fallback.Error
		require.ErrorAs(t, d.err, &fe)
		assert.Equal(t, 2, res.AttemptCount())
		assert.Contains(t, d.err.Error(), "fallback: 2 attempts")
		assert.Contains(t, d.err.Error(), "; continuation b//m")
		require.Len(t, fe.Continuations, 1)
		last, _ := fe.Last()
		assert.Equal(t, "a", last.Key.Provider, "the original failure decides")
		assert.Equal(t, fallback.ClassMidStream, last.Class)
	})
}

// TestContinuationOnCutDeployment is issue 29 item 1: the deployment whose
// stream was cut is itself a continuation target, after the other targets,
// within its attempt budget and only while its breaker allows it.
func TestContinuationOnCutDeployment(t *testing.T) {
	cutOnce := func() replay.Script { return replay.WithFaults(prof(40), replay.CutAfter(10).OnAttempts(1)) }
	tests := []struct {
		name    string
		opts    fallback.Options
		scripts map[string]replay.Script
		plan    route.Plan
		ok      bool
		a, b    int // requests a and b received
	}{
		{"alone", fallback.Options{}, map[string]replay.Script{"a-m": cutOnce()},
			planOf(prefillDep("a", "a-m")), true, 2, 0},
		{"other_target_first", fallback.Options{}, map[string]replay.Script{"a-m": cutOnce(), "b-m": prof(40)},
			planOf(prefillDep("a", "a-m"), prefillDep("b", "b-m")), true, 1, 1},
		{"after_a_rejected_prefill", fallback.Options{MidStream: fallback.MidStreamContinue},
			map[string]replay.Script{"a-m": cutOnce(), "b-m": replay.WithFaults(prof(40), replay.RejectPrefill())},
			planOf(prefillDep("a", "a-m"), prefillDep("b", "b-m")), true, 2, 1},
		{"after_a_failed_continuation_same_model", fallback.Options{},
			map[string]replay.Script{"a-m": cutOnce(), "b-m": replay.WithFaults(prof(40), replay.Status(503, "", nil))},
			planOf(prefillDep("a", "a-m"), prefillDep("b", "b-m")), true, 2, 1},
		{"attempt_budget", fallback.Options{AttemptsPerDeployment: 1}, map[string]replay.Script{"a-m": cutOnce()},
			planOf(prefillDep("a", "a-m")), false, 1, 0},
		{"breaker_open", fallback.Options{Breaker: fallback.BreakerSettings{ConsecutiveFailures: 1}}, map[string]replay.Script{"a-m": cutOnce()},
			planOf(prefillDep("a", "a-m")), false, 1, 0},
		{"no_prefill", fallback.Options{}, map[string]replay.Script{"a-m": cutOnce()},
			planOf(dep("a", "a-m")), false, 1, 0},
		{"error_policy", fallback.Options{MidStream: fallback.MidStreamError}, map[string]replay.Script{"a-m": cutOnce()},
			planOf(prefillDep("a", "a-m")), false, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(tt.scripts, tt.opts)
				res, err := e.do(t, tt.plan, executor.Call{Stream: true})
				require.NoError(t, err)
				d := drain(t, res.Body)
				assert.Len(t, attemptsFor(e.h, "a-m"), tt.a)
				assert.Len(t, attemptsFor(e.h, "b-m"), tt.b)
				if !tt.ok {
					require.ErrorIs(t, d.err, fallback.ErrMidStream)
					assert.True(t, strings.HasPrefix(replay.Text(40), d.text))
					return
				}
				require.NoError(t, d.err)
				assert.Equal(t, replay.Text(40), d.text, "spliced exactly")
				if at := attemptsFor(e.h, "a-m"); tt.a == 2 {
					assert.Equal(t, "assistant", at[1].LastRole, "a continuation, not a new answer")
					assert.Equal(t, "a", res.Deployment().Provider)
				}
			})
		})
	}
}

// TestMidStreamErrorNamesWhy is issue 29 item 2: every mid-stream error
// says, typed and in its message, why no continuation was made, under both
// continuing policies and with continuation off.
func TestMidStreamErrorNamesWhy(t *testing.T) {
	cut := func() replay.Script { return replay.WithFaults(prof(40), replay.CutAfter(10)) }
	other := prefillDep("o", "o-m")
	other.Model = "other"
	tests := []struct {
		name    string
		opts    fallback.Options
		scripts map[string]replay.Script
		plan    route.Plan
		why     fallback.ContinuationReason
		msg     string
	}{
		{"same_model/no_target", fallback.Options{}, map[string]replay.Script{"a-m": cut(), "o-m": prof(40)},
			planOf(dep("a", "a-m"), other), fallback.ContinuationNoTarget, "(continuation not possible: no deployment left that declares assistant prefill)"},
		{"continue/no_target", fallback.Options{MidStream: fallback.MidStreamContinue}, map[string]replay.Script{"a-m": cut(), "b-m": prof(40)},
			planOf(dep("a", "a-m"), dep("b", "b-m")), fallback.ContinuationNoTarget, "(continuation not possible: no deployment left that declares assistant prefill)"},
		{"same_model/rejected", fallback.Options{}, map[string]replay.Script{"a-m": cut(), "b-m": replay.WithFaults(prof(40), replay.RejectPrefill())},
			planOf(dep("a", "a-m"), prefillDep("b", "b-m")), fallback.ContinuationRejected, "(continuation not possible: the continuation on b//m failed: invalid 400)"},
		{"continue/rejected", fallback.Options{MidStream: fallback.MidStreamContinue}, map[string]replay.Script{"a-m": cut(), "o-m": replay.WithFaults(prof(40), replay.RejectPrefill())},
			planOf(dep("a", "a-m"), other), fallback.ContinuationRejected, "(continuation not possible: the continuation on o//other failed: invalid 400)"},
		{"same_model/budget", fallback.Options{AttemptsPerDeployment: 1}, map[string]replay.Script{"a-m": cut()},
			planOf(prefillDep("a", "a-m")), fallback.ContinuationBudget, "(continuation not possible: the attempt budget is spent)"},
		{"continue/budget", fallback.Options{MidStream: fallback.MidStreamContinue, MaxAttempts: 1}, map[string]replay.Script{"a-m": cut(), "o-m": prof(40)},
			planOf(dep("a", "a-m"), other), fallback.ContinuationBudget, "(continuation not possible: the attempt budget is spent)"},
		{"same_model/unavailable", fallback.Options{Breaker: fallback.BreakerSettings{ConsecutiveFailures: 1}}, map[string]replay.Script{"a-m": cut()},
			planOf(prefillDep("a", "a-m")), fallback.ContinuationUnavailable, "(continuation not possible: no target's breaker"},
		{"same_model/failed", fallback.Options{}, map[string]replay.Script{"a-m": cut(), "b-m": replay.WithFaults(prof(40), replay.Status(503, "", nil))},
			planOf(dep("a", "a-m"), prefillDep("b", "b-m")), fallback.ContinuationFailed, "(continuation not possible: the continuation on b//m failed: next 503)"},
		{"error/off", fallback.Options{MidStream: fallback.MidStreamError}, map[string]replay.Script{"a-m": cut(), "b-m": prof(40)},
			planOf(dep("a", "a-m"), prefillDep("b", "b-m")), fallback.ContinuationOff, "(continuation off)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(tt.scripts, tt.opts)
				res, err := e.do(t, tt.plan, executor.Call{Stream: true})
				require.NoError(t, err)
				d := drain(t, res.Body)
				require.ErrorIs(t, d.err, fallback.ErrMidStream)
				var fe *fallback.Error
				require.ErrorAs(t, d.err, &fe)
				assert.Equal(t, tt.why, fe.Continuation(), "%s", fe.Continuation())
				assert.Contains(t, d.err.Error(), tt.msg)
				assert.Equal(t, tt.why != fallback.ContinuationOff, errors.Is(d.err, fallback.ErrContinuation))
				last, _ := fe.Last()
				assert.Equal(t, "a", last.Key.Provider, "the original failure decides")
			})
		})
	}
	t.Run("strings", func(t *testing.T) {
		for r, want := range map[fallback.ContinuationReason]string{
			fallback.NoReason: "", fallback.ContinuationOff: "off", fallback.ContinuationUncommitted: "uncommitted",
			fallback.ContinuationNoTarget: "no-target", fallback.ContinuationRejected: "rejected", fallback.ContinuationBudget: "budget",
			fallback.ContinuationUnavailable: "unavailable", fallback.ContinuationFailed: "failed",
			fallback.ContinuationUnsupported: "unsupported", fallback.ContinuationPointless: "pointless", 200: "reason(200)",
		} {
			assert.Equal(t, want, r.String())
		}
	})
	t.Run("not_mid_stream", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(map[string]replay.Script{"a-m": replay.WithFaults(prof(40), replay.Status(503, "", nil))}, fallback.Options{})
			_, err := e.do(t, planOf(prefillDep("a", "a-m")), executor.Call{Stream: true})
			var fe *fallback.Error
			require.ErrorAs(t, err, &fe)
			assert.Equal(t, fallback.NoReason, fe.Continuation())
		})
	})
}
