package tpsroute

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/route"
)

// defaultMaxWildcardModels is the number of distinct models each wildcard
// deployment keeps statistics for when Config.MaxWildcardModels is zero.
const defaultMaxWildcardModels = 64

// wildcardIdle is how long a wildcard deployment's model keeps its place in
// the cap after its last call: measure's idle-key retention, after which
// its statistics are gone anyway.
const wildcardIdle = 15 * time.Minute

// wildcards admits the models of wildcard deployments that list none: a new
// model is refused once such a deployment holds max models used within
// wildcardIdle. It bounds the statistics keys (and memory) that callers
// inventing model names can create: at most max names per deployment, each
// at most measure.MaxKeyBytes long (readRequest and do refuse longer ones)
// and a copy, never a slice of a request body; a name idle for wildcardIdle
// is released when a new one needs its place. A wildcard with a Models list is bounded
// by its list, which the Picker applies. It is safe for concurrent use.
type wildcards struct {
	max      int
	deps     map[measure.Key]*wildSet // by the unlisted wildcard deployment's Key (Model "*")
	concrete map[measure.Key]bool     // keys of configured non-wildcard deployments
	refused  atomic.Uint64
}

type wildSet struct {
	mu   sync.Mutex
	used map[string]time.Time // model -> last admitted
}

// newWildcards returns the admission state of ds, or nil when none is a
// wildcard. max <= 0 means defaultMaxWildcardModels.
func newWildcards(ds []route.Deployment, max int) *wildcards {
	if max <= 0 {
		max = defaultMaxWildcardModels
	}
	w := &wildcards{max: max, deps: map[measure.Key]*wildSet{}, concrete: map[measure.Key]bool{}}
	wild := false
	for _, d := range ds {
		switch {
		case !d.IsWildcard():
			w.concrete[d.Key()] = true
		case d.Models == nil:
			w.deps[d.Key()] = &wildSet{used: map[string]time.Time{}}
			wild = true
		default:
			wild = true
		}
	}
	if !wild {
		return nil
	}
	return w
}

// admit removes from plan the wildcard candidates whose model (the one
// their statistics are kept under: the call's model, or a fallback model of
// WithModels or the gateway's "models") may not be served, counting those
// refused for the cap. A candidate it keeps has its model's place reserved
// until wildcardIdle after now.
func (w *wildcards) admit(plan route.Plan, now time.Time) route.Plan {
	out := plan.Deployments[:0:0]
	for _, cd := range plan.Deployments {
		k := cd.Key()
		if w.concrete[k] {
			out = append(out, cd)
			continue
		}
		model := k.Model
		k.Model = route.Wildcard
		s := w.deps[k]
		if s == nil || s.admit(model, w.max, now) {
			out = append(out, cd)
		} else {
			w.refused.Add(1) // over the cap
		}
	}
	if len(out) == len(plan.Deployments) {
		return plan
	}
	plan.Deployments = out
	return plan
}

func (s *wildSet) admit(model string, max int, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.used[model]; !ok && len(s.used) >= max {
		for m, at := range s.used {
			if now.Sub(at) > wildcardIdle {
				delete(s.used, m)
			}
		}
		if len(s.used) >= max {
			return false
		}
	}
	s.used[model] = now
	return true
}
