package kloop

import (
	"context"
	"fmt"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/controller"
	"github.com/kloop-dev/kloop/informer"
	"github.com/kloop-dev/kloop/internal/kindgate"
)

// kinds is what Options.WaitForKinds keeps: one gate per custom kind the
// App watches (see package internal/kindgate), the controllers they hold,
// and the goroutines that poll discovery for the shut ones.
type kinds struct {
	mu         sync.Mutex
	gates      map[schema.GroupVersionKind]*kindgate.Gate
	byResource map[string]*kindgate.Gate // kindgate.ResourceName
	order      []*kindgate.Gate
	holds      map[*controller.Controller[cache.Key]]func(cache.Key) bool
	disc       discovery.DiscoveryInterface
	runCtx     context.Context // while Run runs
	wg         sync.WaitGroup
}

// builtIn reports whether gvk's group is one of client-go's built-in
// types, which are always served: they get no gate.
func builtIn(gvk schema.GroupVersionKind) bool {
	return clientgoscheme.Scheme.IsGroupRegistered(gvk.Group)
}

// kindName is a kind as gates and readiness name it: "Foo
// samplecontroller.k8s.io/v1alpha1".
func kindName(gvk schema.GroupVersionKind) string {
	return gvk.Kind + " " + gvk.GroupVersion().String()
}

// kindGate returns the gate of gvk, watched as gvr (namespaced or not),
// making it on first use: open if discovery listed the kind (served) or
// was not asked, shut if it did not. Nil for a built-in kind, and without
// Options.WaitForKinds.
func (a *App) kindGate(gvk schema.GroupVersionKind, gvr schema.GroupVersionResource, namespaced, open bool) *kindgate.Gate {
	if !a.opts.WaitForKinds || builtIn(gvk) {
		return nil
	}
	k := &a.kinds
	k.mu.Lock()
	defer k.mu.Unlock()
	if g, ok := k.gates[gvk]; ok {
		return g
	}
	if k.gates == nil {
		k.gates = map[schema.GroupVersionKind]*kindgate.Gate{}
		k.byResource = map[string]*kindgate.Gate{}
	}
	g := kindgate.New(kindName(gvk), open, "not served", a.probe(gvk, gvr, namespaced))
	k.gates[gvk] = g
	k.byResource[kindgate.ResourceName(gvr)] = g
	k.order = append(k.order, g)
	if k.runCtx != nil {
		ctx := k.runCtx
		k.wg.Go(func() { g.Run(ctx, a.log) })
	}
	return g
}

// gateOf is the factory's WaitFor: the gate of an informer's resource, nil
// (no gate, not a nil *kindgate.Gate) for a resource that never waits.
func (a *App) gateOf(resource string) informer.KindGate {
	resource, _, _ = strings.Cut(resource, " ")
	a.kinds.mu.Lock()
	defer a.kinds.mu.Unlock()
	if g := a.kinds.byResource[resource]; g != nil {
		return g
	}
	return nil
}

// probe asks discovery whether gvk is served, as the resource gvr the
// App's informer watches. Discovery needs no RBAC rule: every
// authenticated user may read it.
func (a *App) probe(gvk schema.GroupVersionKind, gvr schema.GroupVersionResource, namespaced bool) kindgate.Probe {
	path := "/apis/" + gvk.GroupVersion().String()
	return func(ctx context.Context) (bool, string, error) {
		a.kinds.mu.Lock()
		if a.kinds.disc == nil {
			d, err := discovery.NewDiscoveryClientForConfig(a.cfg)
			if err != nil {
				a.kinds.mu.Unlock()
				return false, "", err
			}
			a.kinds.disc = d
		}
		d := a.kinds.disc
		a.kinds.mu.Unlock()
		var list metav1.APIResourceList
		err := d.RESTClient().Get().AbsPath(path).Do(ctx).Into(&list)
		if apierrors.IsNotFound(err) {
			return false, "not served", nil
		}
		if err != nil {
			return false, "", err
		}
		for _, r := range list.APIResources {
			if r.Kind != gvk.Kind || strings.Contains(r.Name, "/") {
				continue
			}
			switch {
			case r.Name != gvr.Resource:
				return false, fmt.Sprintf("served as resource %q, not %q: name it with kloop.ObjectsOptions{Resource: schema.GroupVersionResource{Group: %q, Version: %q, Resource: %q}}",
					r.Name, gvr.Resource, gvr.Group, gvr.Version, r.Name), nil
			case r.Namespaced && !namespaced:
				return false, "served as a namespaced resource, but the App watches it as cluster-scoped: drop ObjectsOptions.ClusterScoped", nil
			case !r.Namespaced && namespaced:
				return false, "served as a cluster-scoped resource, but the App watches it as namespaced: set ObjectsOptions.ClusterScoped", nil
			}
			return true, "", nil
		}
		return false, "not served", nil
	}
}

// holdKinds holds c's workers while a kind of its For or Owns is not
// served: keys that leave the queue then are dropped (the kind's objects
// come back as adds when it is served again, and enqueue every key anew),
// so that no reconcile writes to a resource that is gone.
func (a *App) holdKinds(c *controller.Controller[cache.Key], gates []*kindgate.Gate) error {
	if len(gates) == 0 {
		return nil
	}
	admit := func(cache.Key) bool {
		for _, g := range gates {
			if !g.Open() {
				return false
			}
		}
		return true
	}
	a.kinds.mu.Lock()
	if a.kinds.holds == nil {
		a.kinds.holds = map[*controller.Controller[cache.Key]]func(cache.Key) bool{}
	}
	a.kinds.holds[c] = admit
	a.kinds.mu.Unlock()
	return c.Restrict(context.Background(), admit)
}

// heldBy is the admit of holdKinds for c, nil if none; sharding's
// Restrict of c keeps it (see handover).
func (a *App) heldBy(c *controller.Controller[cache.Key]) func(cache.Key) bool {
	a.kinds.mu.Lock()
	defer a.kinds.mu.Unlock()
	return a.kinds.holds[c]
}

// kindsRunnable polls discovery for the App's shut gates while Run runs,
// on every replica.
type kindsRunnable struct{ a *App }

func (kindsRunnable) NeedLeaderElection() bool { return false }

func (r kindsRunnable) Start(ctx context.Context) error {
	k := &r.a.kinds
	k.mu.Lock()
	k.runCtx = ctx
	for _, g := range k.order {
		k.wg.Go(func() { g.Run(ctx, r.a.log) })
	}
	k.mu.Unlock()
	<-ctx.Done()
	k.mu.Lock()
	k.runCtx = nil
	k.mu.Unlock()
	k.wg.Wait()
	return nil
}

// kindsReport is the /readyz report of Options.WaitForKinds: the kinds
// that are waited for. A kind that is not served does not make the App
// unready: its informers are synced and empty, and its controllers hold.
func (a *App) kindsReport() string {
	a.kinds.mu.Lock()
	gates := append([]*kindgate.Gate(nil), a.kinds.order...)
	a.kinds.mu.Unlock()
	var b strings.Builder
	for _, g := range gates {
		if err := g.Err(); err != nil {
			fmt.Fprintf(&b, "  %v\n", err)
		}
	}
	if b.Len() == 0 {
		return "kinds: every kind served\n"
	}
	return "kinds: some not served (their caches are empty and the controllers of their objects hold; discovery is polled):\n" + b.String()
}
