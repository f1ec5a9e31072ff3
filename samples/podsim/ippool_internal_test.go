package podsim

import (
	"testing"

	"github.com/kloop-dev/kloop/cache"
)

func TestIPPool_OneAddressPerPodReusedAfterReleaseWithinTheCIDR(t *testing.T) {
	p := newIPPool()
	a, b := cache.Key{Namespace: "ns", Name: "a"}, cache.Key{Namespace: "ns", Name: "b"}
	if got := p.assign(a); got != "10.244.0.1" {
		t.Errorf("first address %s, want 10.244.0.1 (the network address is skipped)", got)
	}
	if got := p.assign(a); got != "10.244.0.1" {
		t.Errorf("same pod got %s the second time, want its address again", got)
	}
	if got := p.assign(b); got != "10.244.0.2" {
		t.Errorf("second pod got %s, want 10.244.0.2", got)
	}
	p.release(a)
	p.release(a) // a second release changes nothing
	if got := p.assign(cache.Key{Namespace: "ns", Name: "c"}); got != "10.244.0.1" {
		t.Errorf("after a release got %s, want the freed 10.244.0.1", got)
	}
	if got := p.assign(cache.Key{Namespace: "ns", Name: "d"}); got != "10.244.0.3" {
		t.Errorf("freed address handed out twice: got %s, want 10.244.0.3", got)
	}
	if p.last.String() != "10.244.255.254" {
		t.Errorf("last address %s, want 10.244.255.254 (not the broadcast address)", p.last)
	}
}
