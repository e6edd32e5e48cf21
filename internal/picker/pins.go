package picker

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/route"
)

// checkPins returns a *NameError for a provider or region named by the
// request that no deployment has. Ignore may name anything.
func (p *Picker) checkPins(r *route.Request) error {
	for _, f := range [...]struct {
		field string
		list  []string
		known map[string]struct{}
	}{{"Only", r.Only, p.provs}, {"Providers", r.Providers, p.provs}, {"Regions", r.Regions, p.regions}} {
		for _, name := range f.list {
			if _, ok := f.known[name]; !ok {
				return &route.NameError{Field: f.field, Name: name, Known: setList(f.known)}
			}
		}
	}
	return nil
}

// applyPin moves the candidates of plan that pin matches to its front, or
// only the first of them with only set. When none is included it takes the
// excluded ones (an open breaker, a strict SLO): the pin is the caller's
// explicit choice.
func applyPin(plan route.Plan, pin route.Pin, only bool) (route.Plan, error) {
	out := make([]route.Candidate, 0, len(plan.Deployments))
	for _, cs := range [...][]route.Candidate{plan.Deployments, plan.Excluded} {
		for i := range cs {
			if rk.Matches(pin, cs[i].Deployment) {
				out = append(out, cs[i])
			}
		}
		if len(out) > 0 {
			break // the excluded are taken only when no included one matches
		}
	}
	if len(out) == 0 {
		return route.Plan{Policy: plan.Policy, Excluded: plan.Excluded}, &route.PinError{Provider: pin.Provider, Region: pin.Region}
	}
	if only {
		out = out[:1]
	} else {
		for i := range plan.Deployments {
			if !rk.Matches(pin, plan.Deployments[i].Deployment) {
				out = append(out, plan.Deployments[i])
			}
		}
	}
	plan.Deployments = out
	return plan, nil
}

// resolveModels fills s.models from the request's Model and Models, parsing
// "model@revision" and applying Revision; duplicates are dropped. Every model
// must be configured (or a wildcard deployment must exist).
func (p *Picker) resolveModels(s *scratch) error {
	r := &s.req
	addOne := func(spec string) error {
		name, rev := route.ParseModel(spec)
		keyModel := spec
		if rev == "" && r.Revision != "" {
			rev = r.Revision
			keyModel = name + "@" + rev
		} else if rev == "" {
			keyModel = name
		}
		if name == "" {
			return fmt.Errorf("%w: empty model name in %q", route.ErrNoDeployment, spec)
		}
		idxs := p.byModel[name]
		if !p.serves(idxs, name, rev) {
			field := "Models"
			if r.Model != "" && len(s.models) == 0 {
				field = "Model"
			}
			return &route.NameError{Field: field, Name: keyModel, Known: p.modelNames()}
		}
		for _, m := range s.models {
			if m.name == name && m.rev == rev {
				return nil
			}
		}
		s.models = append(s.models, model{name: name, rev: rev, keyModel: keyModel, idxs: idxs})
		return nil
	}
	if r.Model != "" {
		if err := addOne(r.Model); err != nil {
			return err
		}
	}
	for _, m := range r.Models {
		if err := addOne(m); err != nil {
			return err
		}
	}
	if len(s.models) == 0 {
		return fmt.Errorf("%w: the request names no model; models: %s", route.ErrNoDeployment, strings.Join(p.modelNames(), ", "))
	}
	return nil
}

// noDeployment explains why the pins left no candidate.
func (p *Picker) noDeployment(r *route.Request, models []model) error {
	var b strings.Builder
	fmt.Fprintf(&b, "no deployment of %s", modelList(models))
	if len(r.Only) > 0 {
		fmt.Fprintf(&b, " only %v", r.Only)
	}
	if len(r.Ignore) > 0 {
		fmt.Fprintf(&b, " ignoring %v", r.Ignore)
	}
	if len(r.Regions) > 0 {
		fmt.Fprintf(&b, " in regions %v", r.Regions)
	}
	if r.PriceCap != (measure.Price{}) {
		fmt.Fprintf(&b, " within the price cap (input %g, cached input %g, output %g USD per million tokens)",
			r.PriceCap.Input, r.PriceCap.CachedInput, r.PriceCap.Output)
	}
	b.WriteString("; deployments of these models:")
	n := 0
	for i := range p.ds {
		if d := &p.ds[i]; !d.IsWildcard() && !slices.ContainsFunc(models, func(m model) bool { return m.name == d.Model }) {
			continue
		}
		if n == 20 {
			b.WriteString(" ...")
			break
		}
		b.WriteString(" " + p.keys[i].String())
		n++
	}
	return fmt.Errorf("%w: %s", route.ErrNoDeployment, b.String())
}

// serves reports whether a deployment serves model name at revision rev
// ("" for an unversioned call): one of idxs (p.byModel[name]) with that
// revision, or a wildcard deployment that admits name (its Models list, if
// any, names it).
func (p *Picker) serves(idxs []int32, name, rev string) bool {
	for _, i := range idxs {
		if p.ds[i].Revision == rev {
			return true
		}
	}
	for _, i := range p.wild {
		if d := &p.ds[i]; d.Revision == rev && rk.Admits(d, name) {
			return true
		}
	}
	return false
}

// modelNames lists the models served, sorted: each name, and
// "name@revision" for each revision configured; "*" last with a wildcard
// deployment.
func (p *Picker) modelNames() []string {
	names := make([]string, 0, len(p.byModel)+1)
	for m, idxs := range p.byModel {
		for _, i := range idxs {
			id := m
			if rev := p.ds[i].Revision; rev != "" {
				id += "@" + rev
			}
			names = append(names, id)
		}
	}
	slices.Sort(names)
	names = slices.Compact(names)
	if len(p.wild) > 0 {
		names = append(names, route.Wildcard)
	}
	return names
}

func modelList(models []model) string {
	parts := make([]string, len(models))
	for i, m := range models {
		parts[i] = fmt.Sprintf("%q", m.keyModel)
	}
	return strings.Join(parts, ", ")
}

func setList(set map[string]struct{}) []string {
	names := make([]string, 0, len(set))
	for k := range set {
		names = append(names, strconv.Quote(k))
	}
	slices.Sort(names)
	return names
}
