// Package drift tells whether a server-side apply would change an object.
package drift

import (
	"encoding/json"
	"reflect"

	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// Drifted reports whether a server-side apply of applied would change live:
// whether a field that applied sets has another value in live, or is
// missing there. Fields that live has and applied does not set (those
// other field managers own, and the server's defaults) are not compared,
// nor are fields applied sets to null or to an empty object or list,
// which set nothing, nor apiVersion and kind. Lists of objects are matched
// by their "name" field when every item has one (containers, env vars,
// owner references), item by item otherwise; a list of anything else must
// be equal.
//
// A reconciler that applies what it owns calls it first, so that an object
// already as it wants makes no request; Handle.Repair does that:
//
//	dep, repaired, err := deployments.Repair(ctx, dep, NewDeployment(foo))
//
// live and applied are typed objects (pointers to structs), apply
// configurations (only what they set is compared) or unstructured content; one that cannot be converted counts as drifted,
// so that the apply reports why.
func Drifted(live, applied any) bool {
	l, err := toUnstructured(live)
	if err != nil {
		return true
	}
	a, err := toUnstructured(applied)
	if err != nil {
		return true
	}
	// apiVersion and kind say what the object is, not its state: a typed
	// object from a cache has none.
	fields := make(map[string]any, len(a))
	for k, v := range a {
		if k != "apiVersion" && k != "kind" {
			fields[k] = v
		}
	}
	return !contains(l, fields)
}

func toUnstructured(obj any) (map[string]any, error) {
	switch o := obj.(type) {
	case runtime.Unstructured:
		return o.UnstructuredContent(), nil
	case runtime.ApplyConfiguration: // its JSON is what an apply sends
		if _, ok := o.(json.Marshaler); !ok && reflect.ValueOf(o).Kind() == reflect.Pointer {
			// Walked, not encoded, as the client's Apply does: encoding/json
			// would keep encoders for all the types the configuration's
			// reaches.
			return runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		}
		data, err := json.Marshal(o)
		if err != nil {
			return nil, err
		}
		// Numbers as unstructured content has them (int64 where whole),
		// to compare with the live object's.
		var m map[string]any
		return m, utiljson.Unmarshal(data, &m)
	}
	return runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
}

// contains reports whether live holds every value want sets. A missing
// live value is nil.
func contains(live, want any) bool {
	switch w := want.(type) {
	case nil:
		return true
	case map[string]any:
		l, ok := live.(map[string]any)
		if !ok && live != nil {
			return false
		}
		for k, v := range w {
			if !contains(l[k], v) {
				return false
			}
		}
		return true
	case []any:
		if len(w) == 0 {
			return true
		}
		l, ok := live.([]any)
		if !ok {
			return false
		}
		if byName, ok := names(w); ok {
			liveByName, _ := names(l)
			for n, v := range byName {
				if lv, found := liveByName[n]; !found || !contains(lv, v) {
					return false
				}
			}
			return true
		}
		if len(l) != len(w) {
			return false
		}
		for i := range w {
			if !contains(l[i], w[i]) {
				return false
			}
		}
		return true
	}
	// A float field that holds a whole number is an int64 in content
	// decoded from JSON and a float64 in content converted from a typed
	// object.
	switch l := live.(type) {
	case int64:
		if w, ok := want.(float64); ok {
			return float64(l) == w
		}
	case float64:
		if w, ok := want.(int64); ok {
			return l == float64(w)
		}
	}
	return reflect.DeepEqual(live, want)
}

// names indexes a list of objects by their "name" field, if every item has
// one.
func names(list []any) (map[string]any, bool) {
	m := make(map[string]any, len(list))
	for _, item := range list {
		o, ok := item.(map[string]any)
		if !ok {
			return nil, false
		}
		n, ok := o["name"].(string)
		if !ok {
			return nil, false
		}
		m[n] = o
	}
	return m, true
}
