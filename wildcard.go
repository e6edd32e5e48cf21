package tpsroute

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/route"
)

// DefaultMaxWildcardModels is the number of distinct models each wildcard
// deployment keeps statistics for when Config.MaxWildcardModels is zero.
const DefaultMaxWildcardModels = 64

// wildcardIdle is how long a wildcard deployment's model keeps its place in
// the cap after its last call: measure's idle-key retention, after which
// its statistics are gone anyway.
const wildcardIdle = 15 * time.Minute

// wildcards admits the models of wildcard deployments: a model a
// deployment's Models list does not name is refused, and so is a new model
// once the deployment holds max models used within wildcardIdle. It bounds
// the statistics keys (and memory) that callers inventing model names can
// create. It is safe for concurrent use.
type wildcards struct {
	max      int
	deps     map[measure.Key]*wildSet // by the wildcard deployment's Key (Model "*")
	concrete map[measure.Key]bool     // keys of configured non-wildcard deployments
	refused  atomic.Uint64
}

type wildSet struct {
	list []string // Deployment.Models; nil means any
	mu   sync.Mutex
	used map[string]time.Time // model -> last admitted
}

// newWildcards returns the admission state of ds, or nil when none is a
// wildcard. max <= 0 means DefaultMaxWildcardModels.
func newWildcards(ds []route.Deployment, max int) *wildcards {
	if max <= 0 {
		max = DefaultMaxWildcardModels
	}
	w := &wildcards{max: max, deps: map[measure.Key]*wildSet{}, concrete: map[measure.Key]bool{}}
	for _, d := range ds {
		if d.IsWildcard() {
			w.deps[d.Key()] = &wildSet{list: d.Models, used: map[string]time.Time{}}
		} else {
			w.concrete[d.Key()] = true
		}
	}
	if len(w.deps) == 0 {
		return nil
	}
	return w
}

// admit removes from plan the wildcard candidates that may not serve model,
// counting those refused for the cap. A candidate it keeps has its model's place
// reserved until wildcardIdle after now.
func (w *wildcards) admit(plan route.Plan, model string, now time.Time) route.Plan {
	out := plan.Deployments[:0:0]
	for _, cd := range plan.Deployments {
		k := cd.Key()
		if w.concrete[k] {
			out = append(out, cd)
			continue
		}
		k.Model = route.Wildcard
		s := w.deps[k]
		switch {
		case s == nil || s.admit(model, w.max, now):
			out = append(out, cd)
		case s.list == nil:
			w.refused.Add(1) // over the cap; a list's miss is no refusal
		}
	}
	if len(out) == len(plan.Deployments) {
		return plan
	}
	plan.Deployments = out
	return plan
}

func (s *wildSet) admit(model string, max int, now time.Time) bool {
	if s.list != nil {
		return slices.Contains(s.list, model)
	}
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
