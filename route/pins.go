package route

import (
	"fmt"
	"slices"
	"strings"
)

// checkPins reports a provider or region named by the request that no
// deployment has.
func (p *Picker) checkPins(r *Request) error {
	for _, list := range [2][]string{r.Only, r.Providers} {
		for _, name := range list {
			if _, ok := p.provs[name]; !ok {
				return fmt.Errorf("%w: unknown provider %q; providers: %s", ErrNoDeployment, name, setList(p.provs))
			}
		}
	}
	for _, name := range r.Regions {
		if _, ok := p.regions[name]; !ok {
			return fmt.Errorf("%w: unknown region %q; regions: %s", ErrNoDeployment, name, setList(p.regions))
		}
	}
	return nil
}

// resolveModels fills s.models from the request's Model and Models, parsing
// "model@revision" and applying Revision; duplicates are dropped. Every model
// must be configured (or a wildcard deployment must exist).
func (p *Picker) resolveModels(s *scratch) error {
	r := &s.req
	addOne := func(spec string) error {
		name, rev := ParseModel(spec)
		keyModel := spec
		if rev == "" && r.Revision != "" {
			rev = r.Revision
			keyModel = name + "@" + rev
		} else if rev == "" {
			keyModel = name
		}
		if name == "" {
			return fmt.Errorf("%w: empty model name in %q", ErrNoDeployment, spec)
		}
		idxs, ok := p.byModel[name]
		if !ok && len(p.wild) == 0 {
			return fmt.Errorf("%w: unknown model %q; models: %s", ErrNoDeployment, name, p.modelNames())
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
		return fmt.Errorf("%w: the request names no model; models: %s", ErrNoDeployment, p.modelNames())
	}
	return nil
}

// noDeployment explains why the pins left no candidate.
func (p *Picker) noDeployment(r *Request, models []model) error {
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
	b.WriteString("; deployments of these models:")
	n := 0
	for i, d := range p.ds {
		for _, m := range models {
			if d.Model == m.name || d.Model == Wildcard {
				if n == 20 {
					b.WriteString(" ...")
					return fmt.Errorf("%w: %s", ErrNoDeployment, b.String())
				}
				b.WriteString(" ")
				b.WriteString(p.keys[i].String())
				n++
				break
			}
		}
	}
	return fmt.Errorf("%w: %s", ErrNoDeployment, b.String())
}

func (p *Picker) modelNames() string {
	names := make([]string, 0, len(p.byModel)+1)
	for m := range p.byModel {
		names = append(names, m)
	}
	slices.Sort(names)
	if len(p.wild) > 0 {
		names = append(names, Wildcard)
	}
	return strings.Join(names, ", ")
}

func modelList(models []model) string {
	parts := make([]string, len(models))
	for i, m := range models {
		parts[i] = fmt.Sprintf("%q", m.keyModel)
	}
	return strings.Join(parts, ", ")
}

func setList(set map[string]struct{}) string {
	names := make([]string, 0, len(set))
	for k := range set {
		names = append(names, fmt.Sprintf("%q", k))
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}
