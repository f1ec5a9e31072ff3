package informer

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Owner lists are found by a hash of the list and compared in full: equal
// lists share one slice (the first object's own), and a list whose hash
// finds another list is left as it is.
func TestInterner_OwnerListsAreSharedOnlyWhenEqual(t *testing.T) {
	yes := true
	list := func(name, uid string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: name, UID: types.UID(uid), Controller: &yes}}
	}
	in := newInterner()
	first := list("web-1", "u1")
	if got := in.ownerRefs(first); &got[0] != &first[0] {
		t.Fatal("a list seen first was copied, want it kept as the object's own")
	}
	if got := in.ownerRefs(list("web-1", "u1")); &got[0] != &first[0] {
		t.Error("an equal list is not shared")
	}
	if got := in.ownerRefs(list("web-2", "u2")); &got[0] == &first[0] || got[0].Name != "web-2" {
		t.Errorf("another list got %v, want its own", got)
	}
	notController := list("web-1", "u1")
	notController[0].Controller = nil
	if got := in.ownerRefs(notController); got[0].Controller != nil {
		t.Error("a list that differs only in controller got the controller's list")
	}

	// A list under the hash of another (as if they hashed alike) is not
	// that one.
	clash := list("web-3", "u3")
	in.owners[in.ownersHash(clash)] = first
	if got := in.ownerRefs(clash); &got[0] != &clash[0] {
		t.Errorf("a list whose hash finds another's got %v, want itself", got)
	}
}
