package cache

import (
	"fmt"
	"strings"

	"github.com/kloop-dev/kloop/watcher"
)

// Key identifies an object in a Store: its namespace ("" for cluster-scoped
// objects) and its name.
//
// Key is a struct rather than a "namespace/name" string so that the store's
// maps share the strings already held by the object instead of allocating a
// joined copy per object.
type Key struct {
	Namespace string
	Name      string
}

// KeyOf returns the key of obj.
func KeyOf[T watcher.Object](obj T) Key {
	return Key{Namespace: obj.GetNamespace(), Name: obj.GetName()}
}

// String returns "namespace/name", or "name" for a cluster-scoped object,
// the same form client-go's MetaNamespaceKeyFunc produces.
func (k Key) String() string {
	if k.Namespace == "" {
		return k.Name
	}
	return k.Namespace + "/" + k.Name
}

// parseKey is the inverse of Key.String.
func parseKey(s string) (Key, error) {
	ns, name, found := strings.Cut(s, "/")
	switch {
	case !found && s != "":
		return Key{Name: s}, nil
	case found && ns != "" && name != "" && !strings.Contains(name, "/"):
		return Key{Namespace: ns, Name: name}, nil
	default:
		return Key{}, fmt.Errorf("cache: malformed key %q: want \"name\" or \"namespace/name\"", s)
	}
}
