// Package rvorder compares resourceVersions, the one way the cache, the
// client's write tracker and the App's CatchUp do: as the integers the API
// server issues (Kubernetes 1.35 made them comparable across one cluster),
// with an unparsable one reached only by equality.
package rvorder

import "k8s.io/apimachinery/pkg/util/resourceversion"

// AtOrAfter reports whether resourceVersion have is want or later.
func AtOrAfter(have, want string) bool {
	if have == want {
		return true
	}
	c, err := resourceversion.CompareResourceVersion(have, want)
	return err == nil && c >= 0
}

// Before reports whether resourceVersion a is strictly before b; an
// unparsable one is never before.
func Before(a, b string) bool {
	c, err := resourceversion.CompareResourceVersion(a, b)
	return err == nil && c < 0
}
