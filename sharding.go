package kloop

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kloop-dev/kloop/controller"
	"github.com/kloop-dev/kloop/informer"
	"github.com/kloop-dev/kloop/internal/kindgate"
	"github.com/kloop-dev/kloop/sharding"
)

// Sharding splits the objects of a program's controllers between its
// replicas (Options.Sharding): each replica caches and reconciles the
// objects of its share of the hash space, shares move when replicas come
// and go, and no object is reconciled by two replicas at once. See the
// sharding package for how, and docs/scaling.md for when.
//
// With Key ByNamespace (the default) every namespaced kind's informer is
// sharded by the objects' namespace, so a Foo and the Deployment it owns
// land on one replica; cluster-scoped kinds are watched whole, and their
// keys (which have no namespace) all fall in one slot, so one replica
// reconciles them. With ByUID only the kinds that controllers declare with
// For are sharded, each object by its own UID; the kinds they Own are
// watched whole by every replica.
//
// Controllers must be keyed by cache.Key, or say how their keys are
// placed (KeyedControllerBuilder.Sharded, as a fleet controller's For
// does; see package fleet and docs/fleet.md). Sharding replaces leader
// election: give one or the other.
type Sharding struct {
	// Group names the replicas that share the work; default Options.Name.
	// It must be a DNS label.
	Group string
	// Key places objects: sharding.ByNamespace (default) or ByUID.
	Key sharding.Key
	// Slots is the number of parts the work is cut into; default 64.
	Slots int
	// Namespace of the members' Leases. Default: the App's Namespace, else
	// the namespace of the pod's service account in a cluster.
	Namespace string
	// Identity names this replica; default host name and a random suffix.
	Identity string
	// LeaseDuration, RenewDeadline and RetryPeriod: defaults
	// leaderelection.DefaultLeaseDuration, DefaultRenewDeadline and
	// DefaultRetryPeriod.
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
	// ClientSideOnly never sends shard selectors to the API server (each
	// replica then receives every object and keeps its own): for servers
	// that reject them, and for comparisons.
	ClientSideOnly bool
}

// ShardOf is Options.ShardOf: Member shards the App's namespaced
// informers as those of the cluster named Cluster, until Left is closed
// (see sharding.Member.ShardWhen): close it once the App's Run has
// returned, or once it is known never to run, so that the member forgets
// the App's informers.
type ShardOf struct {
	Member  *sharding.Member
	Cluster string
	Left    <-chan struct{}
}

// shardWith gives the App its shard group member: a new one for
// Options.Sharding, another App's for Options.ShardOf.
func (a *App) shardWith(opts Options) (err error) {
	switch so := opts.ShardOf; {
	case so != nil && (opts.Sharding != nil || opts.LeaderElection != nil):
		return errors.New("kloop.New: ShardOf with Sharding or LeaderElection: ShardOf shards the App's informers for another App's member; give one")
	case so != nil && so.Member == nil:
		return errors.New("kloop.New: ShardOf.Member is nil: give the member of the App that shards")
	case so != nil:
		a.member, a.shardKey, a.shardCluster, a.left = so.Member, sharding.ByNamespace, so.Cluster, so.Left
		a.shardFlags = map[string]*atomic.Bool{}
	case opts.Sharding != nil:
		a.member, err = a.newMember(*opts.Sharding)
		a.shardKey = opts.Sharding.Key
	}
	return err
}

// newMember makes the App's shard group member, when Options.Sharding asks
// for one.
func (a *App) newMember(s Sharding) (*sharding.Member, error) {
	if a.opts.LeaderElection != nil {
		return nil, errors.New("kloop.New: Sharding and LeaderElection together: sharding replaces leader election (every replica works, each on its share); give one")
	}
	ns := a.leaseNamespace(s.Namespace)
	if ns == "" {
		return nil, errors.New("kloop.New: sharding needs the namespace of its Leases: set Sharding.Namespace (--shard-namespace); it defaults to Options.Namespace, or the pod's namespace in a cluster")
	}
	group := s.Group
	if group == "" {
		group = a.opts.Name
	}
	m, err := sharding.New(a.cfg, sharding.Options{
		Group:          group,
		Namespace:      ns,
		Identity:       s.Identity,
		Key:            s.Key,
		Slots:          s.Slots,
		LeaseDuration:  s.LeaseDuration,
		RenewDeadline:  s.RenewDeadline,
		RetryPeriod:    s.RetryPeriod,
		ClientSideOnly: s.ClientSideOnly,
		Logger:         a.log,
		Registerer:     a.opts.Registry,
	})
	if err != nil {
		return nil, fmt.Errorf("kloop.New: sharding: %w", err)
	}
	a.mgr.AddReadyzCheck("sharding", func(*http.Request) error { return shardReady(m.Status()) })
	a.mgr.AddReadyzReport(func() string { return m.Status().String() })
	a.runnables = append(a.runnables, m)
	a.shardFlags = map[string]*atomic.Bool{}
	return m, nil
}

// The reasons a shard group member is not ready.
var (
	errNotJoined = errors.New("sharding: member Lease not written or not renewed in time")
	errBlocked   = errors.New("sharding: a live member has another slot count or shard key")
	errLeaving   = errors.New("sharding: leaving the group")
)

// shardReady is the readiness check of a member in status st: nil once it
// holds a current Lease in a group it agrees with.
func shardReady(st sharding.Status) error {
	switch {
	case st.Leaving:
		return errLeaving
	case !st.Joined:
		return errNotJoined
	case st.Blocked:
		return errBlocked
	}
	return nil
}

// Member is the App's shard group member, nil without Options.Sharding.
func (a *App) Member() *sharding.Member { return a.member }

// shardInformer is the factory's Restrict: each informer is sharded once
// its flag is set (see shardFlag), which happens before Run; with
// Options.ShardOf, as the informer of its cluster.
func (a *App) shardInformer(resource string, scope informer.Scope) *informer.Restriction {
	return a.member.ShardWhen(a.shardCluster, a.left, a.shardFlag(resource, scope).Load)
}

// shardFlag is the flag that says whether the informer of resource in
// scope is sharded.
func (a *App) shardFlag(resource string, scope informer.Scope) *atomic.Bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	k := resource + "\x00" + scope.String()
	f, ok := a.shardFlags[k]
	if !ok {
		f = new(atomic.Bool)
		a.shardFlags[k] = f
	}
	return f
}

// shardObjects marks the informer of a handle's kind sharded: for
// ByNamespace when the kind is namespaced (called from Objects), for ByUID
// when a controller declares it with For.
func (a *App) shardObjects(gvr schema.GroupVersionResource, scope informer.Scope) {
	if a.member == nil {
		return
	}
	a.shardFlag(kindgate.ResourceName(gvr), scope).Store(true)
}

// gate keeps a controller to this replica's share of the keys (see
// sharding.Gate): place tells where a key is (nil: by a cache.Key's
// namespace), keys lists the primary kind's cached keys, held is
// Options.WaitForKinds' hold (nil: none).
func gate[K comparable](a *App, c *controller.Controller[K], held func(K) bool, place func(K) (string, string, bool), keys func() []K) error {
	if a.member == nil {
		return nil
	}
	h := &handover[K]{c: c, held: held}
	if err := c.Watch(h); err != nil {
		return err
	}
	return sharding.Gate(a.member, h, place, keys)
}

// handover is a controller as sharding gates it, whose keys enqueued for a
// slot this replica took over say so in their causes ("Handover"): it is
// also a source of the controller, so that those keys go through a queue
// that records why.
type handover[K comparable] struct {
	c    *controller.Controller[K]
	held func(K) bool // Options.WaitForKinds' hold, kept by every Restrict
	q    atomic.Pointer[controller.Queue[K]]
}

// String names the causes of the keys it enqueues.
func (h *handover[K]) String() string { return "Handover" }

func (h *handover[K]) Register(_ string, q controller.Queue[K]) (controller.Subscription, error) {
	h.q.Store(&q)
	return handoverSub[K]{h}, nil
}

func (h *handover[K]) Restrict(ctx context.Context, admit func(K) bool) error {
	if held := h.held; held != nil {
		if admit == nil {
			admit = held
		} else {
			shard := admit
			admit = func(k K) bool { return held(k) && shard(k) }
		}
	}
	return h.c.Restrict(ctx, admit)
}

// Enqueue adds key through the controller's queue for this source once the
// controller has started, and as an Enqueue before.
func (h *handover[K]) Enqueue(key K) {
	if q := h.q.Load(); q != nil {
		(*q).Add(key)
		return
	}
	h.c.Enqueue(key)
}

// handoverSub is the handover source's subscription: it has no initial
// state to wait for.
type handoverSub[K comparable] struct{ h *handover[K] }

func (handoverSub[K]) WaitForSync(context.Context) error { return nil }
func (s handoverSub[K]) Remove()                         { s.h.q.Store(nil) }
func (handoverSub[K]) Done() <-chan struct{}             { return alwaysDone }

var alwaysDone = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// shardsBy reports whether the App shards by key.
func (a *App) shardsBy(key sharding.Key) bool {
	return a.member != nil && a.shardKey == key
}
