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
	resources         []string // canonical names
}

func newFilter(fc FilterConfig) (*filter, error) {
	sel, err := labels.Parse(fc.LabelSelector)
	if err != nil {
		return nil, err
	}
	f := &filter{events: fc.Events, namespaces: fc.Namespaces, excludeNamespaces: fc.ExcludeNamespaces, selector: sel}
	for _, r := range fc.Resources {
		if br, ok := lookupResource(r); ok {
			r = br.name
		}
		f.resources = append(f.resources, r)
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
	return f.selector.Matches(labels.Set(ev.Labels))
}
