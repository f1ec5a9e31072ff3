// Package convhub finds the Hub version of a kind in a scheme, for package
// webhook's conversion and for kloop's check, when a conversion webhook is
// declared, that the kind has one.
package convhub

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// hubType is webhook.Hub.
type hubType interface {
	runtime.Object
	Hub()
}

// Of returns a new object of the Hub version of gk among scheme's types
// (one with a Hub method: a webhook.Hub). It fails, saying so, when none
// or more than one version of gk is a Hub.
func Of(scheme *runtime.Scheme, gk schema.GroupKind) (runtime.Object, error) {
	var hubs []schema.GroupVersionKind
	var hub hubType
	for gvk := range scheme.AllKnownTypes() {
		if gvk.GroupKind() != gk {
			continue
		}
		obj, err := scheme.New(gvk)
		if err != nil {
			continue
		}
		if h, ok := obj.(hubType); ok {
			hubs = append(hubs, gvk)
			hub = h
			hub.GetObjectKind().SetGroupVersionKind(gvk)
		}
	}
	switch len(hubs) {
	case 0:
		return nil, fmt.Errorf("kind %s has no Hub version in the scheme: give one version's type a Hub() method and the others ConvertTo and ConvertFrom", gk)
	case 1:
		return hub, nil
	default:
		return nil, fmt.Errorf("kind %s has %d Hub versions in the scheme (%v): only one version may have a Hub() method", gk, len(hubs), hubs)
	}
}
