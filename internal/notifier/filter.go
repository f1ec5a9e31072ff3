package notifier

import (
	"slices"

	"k8s.io/apimachinery/pkg/labels"
)

// filter is a compiled FilterConfig.
type filter struct {
	events            []EventType
	namespaces        []string
	excludeNamespaces []string
	selector          labels.Selector
	resources         []string // as given, plus canonical names of built-ins
	severity          string
}

func newFilter(fc FilterConfig) (*filter, error) {
	sel, err := labels.Parse(fc.LabelSelector)
	if err != nil {
		return nil, err
	}
	f := &filter{events: fc.Events, namespaces: fc.Namespaces, excludeNamespaces: fc.ExcludeNamespaces, selector: sel, severity: fc.Severity}
	for _, r := range fc.Resources {
		// Both: a custom resource's plural can be a built-in's alias
		// (core secrets through the dynamic client are "secrets").
		f.resources = append(f.resources, r)
		if br, ok := lookupResource(r); ok && br.name != r {
			f.resources = append(f.resources, br.name)
		}
	}
	return f, nil
}

// match reports whether ev passes the filter.
func (f *filter) match(ev *Event) bool {
	if len(f.events) > 0 && !slices.Contains(f.events, ev.Type) {
		return false
	}
	if len(f.namespaces) > 0 && !slices.Contains(f.namespaces, ev.Namespace) {
		return false
	}
	if slices.Contains(f.excludeNamespaces, ev.Namespace) {
		return false
	}
	if len(f.resources) > 0 && !slices.Contains(f.resources, ev.Resource) {
		return false
	}
	if f.severity != "" && severityRank(ev.severity()) < severityRank(f.severity) {
		return false
	}
	return f.selector.Matches(labels.Set(ev.Labels))
}
