package sharding

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kloop-dev/kloop/internal/slots"

	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/informer"
	"github.com/kloop-dev/kloop/internal/lease"
	"github.com/kloop-dev/kloop/leaderelection"
	"github.com/kloop-dev/kloop/watcher"
)

const (
	shardingUnknown int32 = iota
	shardingOn
	shardingOff
)

// everything is a shard selector that matches every object: sent with the
// Lease lists, whose ShardInfo then tells whether the server applies shard
// selectors at all.
var everything = "shardRange(object.metadata.uid, '0x0000000000000000', '0x10000000000000000')"

// Defaults of Options.
const (
	DefaultSlots        = 64
	DefaultLeaveTimeout = 30 * time.Second
)

// ErrInvalidConfig is wrapped by New's validation errors.
var ErrInvalidConfig = errors.New("sharding: invalid config")

// Options configure a Member. Group and Namespace are required; every other
// zero value takes the documented default.
type Options struct {
	// Group names the set of replicas that share the work, such as the
	// program's name. Every replica of a group uses the same Group, Key and
	// Slots. It must be a DNS label (lower case, digits, '-').
	Group string
	// Namespace holds the members' Leases. Required.
	Namespace string
	// Identity names this replica; it must be unique in the group and,
	// joined to Group with '-', a valid object name. Default: the host name
	// and 8 random hex digits.
	Identity string

	// Key is what places an object in a slot: ByNamespace (the default) or
	// ByUID. See Key.
	Key Key
	// Slots is the number of parts the hash space is cut into, the unit of
	// handover. More slots spread the work more evenly and move less at a
	// time; fewer give shorter shard selectors. Default 64; at most 4096.
	Slots int

	// LeaseDuration is how long the others wait, after they last saw this
	// member's Lease change, before they count it gone and take its slots.
	// RenewDeadline is how long this member keeps trying to renew before it
	// gives everything up; the difference is the time its reconciles have
	// to stop. RetryPeriod is the renewal interval, after a failed write
	// as after a successful one (as for leader election). Defaults: leader
	// election's, leaderelection.DefaultLeaseDuration, DefaultRenewDeadline
	// and DefaultRetryPeriod.
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration

	// LeaveTimeout bounds the stop: once Start's context is done, the
	// member releases its slots (waiting for reconciles in flight) and
	// deletes its Lease, so that the others take over at once. If that
	// takes longer, it stops renewing and leaves the Lease to expire.
	// Default 30s.
	LeaveTimeout time.Duration

	// ClientSideOnly never sends a shard selector: every object reaches
	// this replica, which keeps its own. That is what a server without
	// sharded list and watch gives anyway; set it to compare, or for an
	// API server that rejects the parameter.
	ClientSideOnly bool

	// Clock is the source of time. Default: the real clock.
	Clock clock.Clock
	// Logger receives the member's logs. Default slog.Default().
	Logger *slog.Logger
	// Registerer receives the member's metrics. Default: the kloop registry.
	Registerer prometheus.Registerer
}

// timing is the timing of the member's Lease.
func (c *Options) timing() lease.Timing {
	return lease.Timing{LeaseDuration: c.LeaseDuration, RenewDeadline: c.RenewDeadline, RetryPeriod: c.RetryPeriod}
}

func (c *Options) resolve() error {
	if c.Slots == 0 {
		c.Slots = DefaultSlots
	}
	t, timingErr := c.timing().WithDefaults(true)
	c.LeaseDuration, c.RenewDeadline, c.RetryPeriod = t.LeaseDuration, t.RenewDeadline, t.RetryPeriod
	if c.LeaveTimeout == 0 {
		c.LeaveTimeout = DefaultLeaveTimeout
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Identity == "" {
		c.Identity = defaultIdentity()
	}
	var errs []string
	if msgs := validation.IsDNS1123Label(c.Group); len(msgs) > 0 {
		errs = append(errs, fmt.Sprintf("Group %q: %s", c.Group, strings.Join(msgs, "; ")))
	}
	if c.Namespace == "" {
		errs = append(errs, "Namespace is required")
	}
	if msgs := validation.IsDNS1123Subdomain(leaseName(c.Group, c.Identity)); len(msgs) > 0 {
		errs = append(errs, fmt.Sprintf("Identity %q: %s", c.Identity, strings.Join(msgs, "; ")))
	}
	if c.Key > ByUID {
		errs = append(errs, fmt.Sprintf("Key %d is neither ByNamespace nor ByUID", c.Key))
	}
	if c.Slots < 1 || c.Slots > 4096 {
		errs = append(errs, fmt.Sprintf("Slots %d is outside 1-4096", c.Slots))
	}
	if timingErr != nil {
		errs = append(errs, timingErr.Error())
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %s", ErrInvalidConfig, strings.Join(errs, "; "))
	}
	return nil
}

func defaultIdentity() string {
	host, _ := os.Hostname()
	host = strings.ToLower(host)
	host = strings.Map(func(r rune) rune {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r == '-' {
			return r
		}
		return '-'
	}, host)
	host = strings.Trim(host, "-")
	if len(host) > 40 {
		host = host[:40]
	}
	if host == "" {
		host = "replica"
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return host + "-" + hex.EncodeToString(b)
}

// The rights a member needs on the group's Leases, in their namespace: its
// own Lease (get, create, update, and delete when it leaves), the others'
// (list and watch, and delete of a member gone for good). controller-gen's RBAC
// generator turns these into a Role there ("system" is a placeholder that
// kustomize replaces with the deployable's namespace; see deploy/).
//
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;delete,namespace=system

// Member is one replica of a shard group. It holds a Lease among the
// group's, takes its share of the slots, and scopes the informers (through
// the factory's Restrict: Shard) and controllers (Gate) it is given to the
// slots it holds. Start runs it; see the package documentation.
type Member struct {
	cfg    Options
	leases leaseClient
	lw     watcher.ListerWatcher[*coordinationv1.Lease] // the group's Leases
	log    *slog.Logger
	m      *memberMetrics
	name   string // our Lease's name

	// serverSharding is whether the API server applies shard selectors,
	// as the ShardInfo of the Lease lists tells: shardingUnknown, On, Off.
	serverSharding atomic.Int32

	scope  atomic.Pointer[slots.Set] // slots whose objects we cache: starting and active
	active atomic.Pointer[slots.Set] // slots whose caches have filled in every cluster
	// filling is, per cluster of a fleet ("" for the member's own), the
	// slots of scope whose objects that cluster's informers are still
	// relisting: their keys wait. Replaced whole under mu.
	filling atomic.Pointer[map[string]slots.Set]
	started atomic.Bool

	mu        sync.Mutex
	informers []attached
	gates     []gate
	status    Status        // latest, for Status
	statusCh  chan struct{} // closed when status is next replaced
}

// New returns a member talking to the API server at cfg. It does no I/O and
// starts nothing.
func New(cfg *rest.Config, c Options) (*Member, error) {
	if err := c.resolve(); err != nil {
		return nil, err
	}
	// The Lease client and timings of leader election: one Lease
	// mechanism for both.
	leases, err := lease.NewClient(cfg, leaderelection.FieldManager, c.Logger)
	if err != nil {
		return nil, fmt.Errorf("sharding: %w", err)
	}
	lw, err := watcher.FromResource[*coordinationv1.Lease](cfg, clientgoscheme.Scheme, coordinationv1.SchemeGroupVersion.WithResource("leases"),
		watcher.Scope{Namespace: c.Namespace, LabelSelector: GroupLabel + "=" + c.Group})
	if err != nil {
		return nil, fmt.Errorf("sharding: %w", err)
	}
	return newMember(leases, lw, c)
}

// leaseClient is what a member does with Leases one by one: its own
// (through a lease.Held), and deleting those members left
// behind.
type leaseClient interface {
	lease.Client
	Delete(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error
}

func newMember(leases leaseClient, lw watcher.ListerWatcher[*coordinationv1.Lease], c Options) (*Member, error) {
	m := &Member{
		cfg:    c,
		leases: leases,
		lw:     lw,
		log:    c.Logger.With("shardGroup", c.Group, "member", c.Identity),
		name:   leaseName(c.Group, c.Identity),
	}
	empty := slots.New(c.Slots)
	m.scope.Store(&empty)
	m.active.Store(&empty)
	m.filling.Store(&map[string]slots.Set{})
	mm, err := newMemberMetrics(c.Registerer, c.Group, m.objects)
	if err != nil {
		m.log.Warn("sharding metrics not registered", "err", err)
	}
	m.m = mm
	m.status = Status{Group: c.Group, Identity: c.Identity, Slots: c.Slots, Key: c.Key}
	m.statusCh = make(chan struct{})
	return m, nil
}

// identity is this replica's name in the group.
func (m *Member) identity() string { return m.cfg.Identity }

// owns reports whether obj, of the fleet cluster named cluster ("" for
// the member's own), is in this replica's slots now.
func (m *Member) owns(cluster string, obj metav1.Object) bool {
	return m.scope.Load().Has(m.slotOf(cluster, m.cfg.Key.value(obj)))
}

// slotOf is the slot of an object of cluster whose key field (namespace or
// UID) is value: the one place a replica places objects and keys. In a
// fleet each cluster's hash slots are turned by an offset of its own
// (slots.In), so that a unit (cluster, hash slot) is held by whoever holds
// its turned slot.
func (m *Member) slotOf(cluster, value string) int { return slots.In(cluster, value, m.cfg.Slots) }

// admits reports whether a key of cluster whose key field is value may be
// reconciled now: its slot is in scope, and that cluster's caches hold the
// slot's objects.
func (m *Member) admits(cluster, value string) bool {
	s := m.slotOf(cluster, value)
	if !m.scope.Load().Has(s) {
		return false
	}
	f, ok := (*m.filling.Load())[cluster]
	return !ok || !f.Has(s)
}

// inScope is the set of slots whose objects this replica caches now: the
// slots it works on, and those it is starting (whose caches are filling).
func (m *Member) inScope() slots.Set { return *m.scope.Load() }

// activeNow is the set of slots whose keys this replica reconciles now.
func (m *Member) activeNow() slots.Set { return *m.active.Load() }

// selector is the shard selector of the current scope in cluster.
func (m *Member) selector(cluster string) string {
	if m.cfg.ClientSideOnly {
		return ""
	}
	return selector(m.cfg.Key, slots.Turn(*m.scope.Load(), cluster))
}

// Shard restricts an informer to this replica's slots: pass it as
// informer.FactoryOptions.Restrict, and every informer the factory creates
// follows them. Shard only the informers whose objects carry the key: for
// ByNamespace the namespaced kinds, for ByUID the kinds reconciled on
// their own; a factory that also holds others shards only those (as the App does).
func (m *Member) Shard(resource string, scope informer.Scope) *informer.Restriction {
	return &informer.Restriction{
		ListOptions: func(opts *metav1.ListOptions) { opts.ShardSelector = m.selector("") },
		Keep:        func(obj watcher.Object) bool { return m.owns("", obj) },
		Attach:      func(r informer.Restricted) { m.attach(attached{r: r}) },
	}
}

// ShardWhen is Shard for an informer whose sharding is decided after it
// is made, but before it starts (say, once a controller declares it as
// its primary kind), of the fleet cluster named cluster ("" for the
// member's own cluster): while on reports false the informer sends no
// selector, keeps every object and is not told of handovers. on must give
// its final answer before the informer starts. Once left is closed (nil:
// never), the informer has stopped for good and the member forgets it.
//
// A fleet's clusters share the member's slots: slot s holds, of each
// cluster, the objects whose key hashes into that cluster's hash slot
// turned by an offset of the cluster's own, so a replica holds about 1/N
// of every cluster, and a namespace found in every cluster is not held by
// one replica everywhere.
func (m *Member) ShardWhen(cluster string, left <-chan struct{}, on func() bool) *informer.Restriction {
	return &informer.Restriction{
		ListOptions: func(opts *metav1.ListOptions) {
			if on() {
				opts.ShardSelector = m.selector(cluster)
			}
		},
		Keep:   func(obj watcher.Object) bool { return !on() || m.owns(cluster, obj) },
		Attach: func(r informer.Restricted) { m.attach(attached{r: r, cluster: cluster, on: on, left: left}) },
	}
}

// attached is an informer a member moves: of cluster ("" for its own),
// while on says so (nil: always), until left is closed (nil: never).
type attached struct {
	r       informer.Restricted
	cluster string
	on      func() bool
	left    <-chan struct{}
}

func (a attached) gone() bool {
	select {
	case <-a.left:
		return true
	default:
		return false
	}
}

// only returns a FactoryOptions.Restrict that shards the informers pick
// accepts and leaves the others whole.
func (m *Member) only(pick func(resource string, scope informer.Scope) bool) func(resource string, scope informer.Scope) *informer.Restriction {
	return func(resource string, scope informer.Scope) *informer.Restriction {
		if !pick(resource, scope) {
			return nil
		}
		return m.Shard(resource, scope)
	}
}

func (m *Member) attach(a attached) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.informers = append(m.informers, a)
}

// Gated is a controller that can be kept to the keys of some slots; every
// *controller.Controller[K] is one.
type Gated[K comparable] interface {
	Restrict(ctx context.Context, admit func(K) bool) error
	Enqueue(key K)
}

// gate is one gateBy: restrict waits for the keys outside the active slots,
// activate enqueues the keys of newly active slots in the clusters which
// picks.
type gate struct {
	restrict func(ctx context.Context) error
	activate func(slots slots.Set, which func(cluster string) bool)
}

// gateBy keeps c to this replica's slots: it reconciles a key only while
// the key is in a slot this replica holds with its caches filled (in the
// key's cluster), and a slot is given up only once c has no Reconcile of
// its keys in flight. place tells where a key is (see Gate); a key it
// cannot place is not reconciled. keys lists the keys c would reconcile if
// it started now (the keys of its primary kind's cached objects): when a
// slot becomes active, those of it are enqueued, since the notifications
// of the slot's objects came while the slot's caches were still filling
// and their keys were left out then. Call it before Start.
func gateBy[K comparable](m *Member, c Gated[K], place func(K) (cluster, value string, ok bool), keys func() []K) {
	admit := func(k K) bool {
		cl, v, ok := place(k)
		return ok && m.admits(cl, v)
	}
	// Nothing is in flight before Start, so this returns at once; from now
	// on admit follows the active slots as they change.
	_ = c.Restrict(context.Background(), admit)
	g := gate{
		restrict: func(ctx context.Context) error { return c.Restrict(ctx, admit) },
		activate: func(slots slots.Set, which func(string) bool) {
			if keys == nil {
				return
			}
			for _, k := range keys() {
				if cl, v, ok := place(k); ok && which(cl) && slots.Has(m.slotOf(cl, v)) {
					c.Enqueue(k)
				}
			}
		},
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.gates = append(m.gates, g)
}

// Gate keeps c to this replica's slots: it reconciles a key only while
// the key is in a slot this replica holds with its caches filled, and a
// slot is given up only once c has no Reconcile of its keys in flight.
// place tells where a key is: the fleet cluster of its object ("" for the
// member's own cluster, as for every key of a program of one cluster; see
// ShardWhen) and the value of the member's Key for it: the key's namespace
// (ByNamespace), or the UID of the primary kind's cached object (ByUID;
// ok false when it is not cached, and the key is then not reconciled).
// place may be nil for a controller keyed by cache.Key sharded
// ByNamespace. keys lists the primary kind's cached keys: when a slot
// becomes active, those of it are enqueued, since the notifications of
// the slot's objects came while its caches were still filling. Both come
// from the controller's primary kind, which sharding needs: its objects
// are what a replica takes over. Call Gate before Start.
func Gate[K comparable](m *Member, c Gated[K], place func(K) (cluster, value string, ok bool), keys func() []K) error {
	if keys == nil {
		return errors.New("sharding needs a controller with a For kind: its objects are what a replica takes over")
	}
	if place == nil {
		byNamespace, ok := any(func(k cache.Key) (string, string, bool) { return "", k.Namespace, true }).(func(K) (string, string, bool))
		switch {
		case m.cfg.Key == ByUID:
			return errors.New("sharding by UID needs a For kind: its objects' UIDs place the keys (give Gate a place that looks them up)")
		case !ok:
			return errors.New("sharding: Gate needs a place for keys other than cache.Key")
		}
		place = byNamespace
	}
	gateBy(m, c, place, keys)
	return nil
}

// snapshot returns the informers that are sharded now, and the gates. It
// forgets the informers whose cluster has left.
func (m *Member) snapshot() ([]attached, []gate) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.snapshotLocked(), append([]gate(nil), m.gates...)
}

func (m *Member) snapshotLocked() []attached {
	m.informers = slices.DeleteFunc(m.informers, attached.gone)
	infs := make([]attached, 0, len(m.informers))
	for _, a := range m.informers {
		if a.on != nil && !a.on() {
			continue
		}
		infs = append(infs, a)
	}
	return infs
}

func (m *Member) objects() float64 {
	infs, _ := m.snapshot()
	n := 0
	for _, a := range infs {
		n += a.r.Len()
	}
	return float64(n)
}

// NeedLeaderElection tells a manager to run the member on every replica.
func (m *Member) NeedLeaderElection() bool { return false }

// Start runs the member until ctx is done: it creates and renews its Lease,
// watches the group's, takes and gives up slots, and finally releases
// everything and deletes its Lease (see Options.LeaveTimeout). It returns
// nil after a stop through ctx, or an error if it cannot run at all.
func (m *Member) Start(ctx context.Context) error {
	if !m.started.CompareAndSwap(false, true) {
		return errors.New("sharding: member already started")
	}
	c := newCore(m.cfg.Identity, m.cfg.Slots, m.cfg.Key, m.cfg.timing())
	c.joinDelay = m.cfg.RetryPeriod
	r := &run{m: m, c: c, clk: m.cfg.Clock, own: lease.NewHeld(m.leases, m.cfg.Namespace, m.name)}
	return r.loop(ctx)
}

// run is the state of one Start: owned by its goroutine, except what the
// channels carry.
type run struct {
	m   *Member
	c   *core
	clk clock.Clock

	own          *lease.Held // our Lease as last written or read
	lastWriteErr string      // the last failed write's error, logged once
	written      string      // held/draining as last written

	changed     chan struct{}
	released    chan slots.Set
	started     chan filled
	stop        chan struct{} // closed when the loop returns
	drainCtx    context.Context
	drains      sync.WaitGroup
	draining    int
	background  sync.WaitGroup
	warnedLease map[string]string // lease name → resourceVersion already warned about

	collected map[string]string // lease name → resourceVersion deleted (or tried)

	seenMu sync.Mutex
	seen   map[string]seenAt // lease name → when its resourceVersion arrived
}

type seenAt struct {
	rv string
	at time.Time
}

// noteSeen records when a Lease's new state arrived, so that the time the
// loop gets to it does not count against its holder.
func (r *run) noteSeen(l *coordinationv1.Lease) {
	r.seenMu.Lock()
	defer r.seenMu.Unlock()
	if s, ok := r.seen[l.Name]; !ok || s.rv != l.ResourceVersion {
		r.seen[l.Name] = seenAt{rv: l.ResourceVersion, at: r.clk.Now()}
	}
}

func (r *run) loop(ctx context.Context) error {
	m := r.m
	r.changed = make(chan struct{}, 1)
	r.released = make(chan slots.Set, 16)
	r.started = make(chan filled, 16)
	r.stop = make(chan struct{})
	r.warnedLease = make(map[string]string)
	r.seen = make(map[string]seenAt)
	r.collected = make(map[string]string)
	defer r.background.Wait()
	defer close(r.stop)

	// The group's Leases are not worth series of their own.
	name := "shard group " + m.cfg.Group
	linf, err := informer.New(watcher.NewReflector(m.lw, watcher.Options{Name: name, Logger: m.cfg.Logger, Registerer: prometheus.NewRegistry()}),
		informer.Options[*coordinationv1.Lease]{Name: name, Logger: m.cfg.Logger, Registerer: prometheus.NewRegistry()})
	if err != nil {
		return err
	}
	poke := func() {
		select {
		case r.changed <- struct{}{}:
		default:
		}
	}
	if _, err := linf.AddHandler(informer.HandlerFuncs[*coordinationv1.Lease]{
		AddFunc:    func(l *coordinationv1.Lease, _ bool) { r.noteSeen(l); poke() },
		UpdateFunc: func(_, l *coordinationv1.Lease) { r.noteSeen(l); poke() },
		DeleteFunc: func(obj *coordinationv1.Lease, finalStateUnknown bool) {
			r.seenMu.Lock()
			delete(r.seen, obj.Name)
			r.seenMu.Unlock()
			poke()
		},
	}, informer.HandlerOptions{Name: "member"}); err != nil {
		return err
	}
	infCtx, stopInf := context.WithCancel(context.WithoutCancel(ctx))
	var infDone sync.WaitGroup
	infDone.Go(func() { _ = linf.Start(infCtx) })
	defer func() {
		stopInf()
		infDone.Wait()
	}()
	if err := linf.WaitForSync(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("sharding: group %s: %w", m.cfg.Group, err)
	}
	m.log.Info("Joining shard group", "slots", m.cfg.Slots, "key", m.cfg.Key.String(), "namespace", m.cfg.Namespace)

	// Every request of the loop gets its own bound, and keeps working
	// after ctx is done, while the member leaves.
	reqCtx := context.WithoutCancel(ctx)
	drainCtx, cancelDrains := context.WithCancel(reqCtx)
	defer cancelDrains()
	r.drainCtx = drainCtx
	var leaveBy time.Time
	for {
		now := r.clk.Now()
		if ctx.Err() != nil && !r.c.leaving {
			r.c.leaving = true
			leaveBy = now.Add(m.cfg.LeaveTimeout)
			m.log.Info("Leaving shard group: releasing slots", "held", r.c.held().String())
		}
		r.c.observe(now, r.records(linf.Lister().List(nil)))

		r.collect(reqCtx, now)
		p := r.c.next(now)
		if p.release.Len() > 0 {
			r.release(now, p.release)
			r.report(r.clk.Now()) // before a write that may hang
		}
		if p.claim.Len() > 0 {
			r.claim(reqCtx, p.claim)
		} else if r.due(now) {
			r.write(reqCtx)
		}
		r.report(r.clk.Now())

		if r.c.leaving {
			if r.c.held().Len() == 0 && r.draining == 0 {
				r.deleteLease(reqCtx)
				m.log.Info("Left shard group")
				return nil
			}
			if !r.clk.Now().Before(leaveBy) {
				m.log.Warn("Leave timeout: reconciles still in flight; leaving the Lease to expire", "held", r.c.held().String())
				cancelDrains()
				r.waitDrains()
				return nil
			}
		}

		// The next renewal, or the renew deadline, is the latest wake.
		wake := r.c.renewal.Wake(r.clk.Now())
		if !p.wake.IsZero() && p.wake.Before(wake) {
			wake = p.wake
		}
		if r.c.leaving && leaveBy.Before(wake) {
			wake = leaveBy
		}
		timer := r.clk.NewTimer(max(wake.Sub(r.clk.Now()), time.Millisecond))
		done := ctx.Done()
		if r.c.leaving {
			done = nil
		}
		select {
		case <-done:
		case <-r.changed:
		case <-timer.C():
		case s := <-r.released:
			r.finishRelease(s)
		case f := <-r.started:
			r.filled(f)
		}
		timer.Stop()
	}
}

// records reads the group's Leases, skipping (and logging) any it cannot.
func (r *run) records(leases []*coordinationv1.Lease) []record {
	out := make([]record, 0, len(leases))
	for _, l := range leases {
		if l.Name == r.m.name {
			continue
		}
		rec, err := recordOf(l)
		r.seenMu.Lock()
		if s, ok := r.seen[l.Name]; ok && s.rv == l.ResourceVersion {
			rec.Seen = s.at
		}
		r.seenMu.Unlock()
		if err != nil {
			if r.warnedLease[l.Name] != l.ResourceVersion {
				r.warnedLease[l.Name] = l.ResourceVersion
				r.m.log.Warn("Ignoring a Lease of the group", "lease", l.Name, "err", err)
			}
			continue
		}
		out = append(out, rec)
	}
	return out
}

// due reports whether our Lease is to be written at now: a renewal is due
// (lease.Renewal), or what it lists has changed.
func (r *run) due(now time.Time) bool {
	return r.c.renewal.Due(now) || r.heldText() != r.written
}

func (r *run) heldText() string {
	return r.c.held().String() + "|" + r.c.inState(slotReleasing).String()
}

// bound is how long a request of the loop may take (lease.Renewal.Bound):
// no later than the renew deadline while the Lease is current, so that a
// hanging API server cannot keep the loop from noticing the deadline and
// giving everything up in time; a RetryPeriod once it has passed.
func (r *run) bound() time.Duration { return r.c.renewal.Bound(r.clk.Now()) }

// write creates or renews our Lease with what the core holds. It reports
// whether the write succeeded.
func (r *run) write(ctx context.Context) bool {
	m := r.m
	start := r.clk.Now()
	ctx, cancel := context.WithTimeout(ctx, r.c.renewal.Bound(start))
	defer cancel()
	rec := record{
		Identity: m.cfg.Identity,
		Slots:    m.cfg.Slots,
		Key:      m.cfg.Key,
		Held:     r.c.held(),
		Draining: r.c.inState(slotReleasing),
		Duration: m.cfg.LeaseDuration,
	}
	text := r.heldText()
	_, err := r.own.ReadAndWrite(ctx, func(l *coordinationv1.Lease) { writeRecord(l, m.cfg.Group, rec, start) })
	if err != nil {
		r.own.Forget() // read it again next time
		m.m.renewFailures.Inc()
		if msg := err.Error(); msg != r.lastWriteErr {
			r.lastWriteErr = msg
			m.log.Warn("Writing the member Lease failed", "err", err)
		} else {
			m.log.Debug("Writing the member Lease failed again", "err", err)
		}
		if r.c.lost(r.clk.Now()) {
			m.log.Error("Member Lease not renewed within the renew deadline: giving up every slot", "renewDeadline", m.cfg.RenewDeadline)
		}
		r.c.renewal.Failed(start) // retried RetryPeriod after this one started
		return false
	}
	r.written = text
	if r.lastWriteErr != "" {
		r.lastWriteErr = ""
		m.log.Info("Member Lease written again")
	}
	r.c.wrote(start)
	return true
}

// claim writes claimed slots into our Lease, reads every Lease afresh and
// starts those slots nobody else holds.
func (r *run) claim(ctx context.Context, claim slots.Set) {
	m := r.m
	now := r.clk.Now()
	r.c.set(now, claim, slotClaiming)
	ok := r.write(ctx)
	if ok {
		lctx, cancel := context.WithTimeout(ctx, r.bound())
		list, err := m.lw.List(lctx, metav1.ListOptions{ShardSelector: everything})
		cancel()
		if err == nil {
			if list.ListMeta.ShardInfo != nil {
				m.serverSharding.Store(shardingOn)
			} else {
				m.serverSharding.Store(shardingOff)
			}
		}
		if err != nil {
			m.log.Warn("Reading the group's Leases to confirm a claim failed", "err", err)
			ok = false
		} else {
			r.c.observe(r.clk.Now(), r.records(list.Items))
		}
	}
	if !ok {
		// Unconfirmed claims are given up; the next round tries again.
		r.c.set(r.clk.Now(), r.c.inState(slotClaiming), slotFree)
		r.write(ctx)
		return
	}
	start, waited := r.c.confirm(r.clk.Now())
	if given := claim.Minus(start); given.Len() > 0 {
		m.log.Info("Claim given up: another member holds or claims these slots", "slots", given.String())
	}
	if start.Len() > 0 {
		r.begin(start, waited)
	}
	if r.heldText() != r.written {
		r.write(ctx)
	}
}

// begin brings slots into scope: each cluster's informers relist to
// fetch the slots' objects; once a cluster's have, the slots' keys of that
// cluster are let through (filled), and once every cluster's have, the
// slots are active.
func (r *run) begin(slots slots.Set, waited []time.Duration) {
	m := r.m
	r.c.set(r.clk.Now(), slots, slotStarting)
	// Under mu, so that an informer attached later lists with the new
	// scope, and one attached before is relisted below.
	m.mu.Lock()
	infs := m.snapshotLocked()
	byCluster := map[string][]attached{}
	for _, a := range infs {
		byCluster[a.cluster] = append(byCluster[a.cluster], a)
	}
	fill := maps.Clone(*m.filling.Load())
	for c := range byCluster {
		fill[c] = fill[c].Union(slots)
	}
	m.filling.Store(&fill)
	scope := m.inScope().Union(slots)
	m.scope.Store(&scope)
	m.mu.Unlock()
	for _, w := range waited {
		m.m.handoverDuration.WithLabelValues("in").Observe(w.Seconds())
	}
	m.m.handovers.WithLabelValues("in").Add(float64(slots.Len()))
	m.log.Info("Starting slots", "slots", slots.String(), "scope", scope.String())
	b := &batch{slots: slots, clusters: map[string]bool{}, left: len(byCluster)}
	if len(byCluster) == 0 {
		r.background.Go(func() { r.send(filled{batch: b, none: true}) })
		return
	}
	// Caches fill in the background, each cluster's on its own, so that
	// a cluster that does not answer holds up only its own keys; an
	// informer whose cluster left counts as filled.
	for c, list := range byCluster {
		b.clusters[c] = true
		relisted := make([]<-chan struct{}, 0, len(list))
		for _, a := range list {
			relisted = append(relisted, a.r.Relist())
		}
		r.background.Go(func() {
			for i, ch := range relisted {
				select {
				case <-ch:
				case <-list[i].left:
				case <-r.stop:
					return
				}
			}
			r.send(filled{batch: b, cluster: c})
		})
	}
}

// batch is one begin's slots and the clusters still relisting them.
type batch struct {
	slots    slots.Set
	clusters map[string]bool // clusters whose informers relist (read-only once begun)
	left     int             // of them, how many have not filled yet (the loop's)
}

// filled says that cluster's informers have relisted for a batch (none:
// the batch had no informers to relist).
type filled struct {
	batch   *batch
	cluster string
	none    bool
}

func (r *run) send(f filled) {
	select {
	case r.started <- f:
	case <-r.stop:
	}
}

// filled lets a cluster's keys of a batch's slots through and enqueues
// them, once its caches have filled; once every cluster's have, the slots
// are active.
func (r *run) filled(f filled) {
	m := r.m
	b := f.batch
	now := b.slots.Intersect(m.inScope()) // not released meanwhile
	_, gates := m.snapshot()
	if !f.none {
		m.mu.Lock()
		fill := maps.Clone(*m.filling.Load())
		if rest := fill[f.cluster].Minus(b.slots); rest.Len() > 0 {
			fill[f.cluster] = rest
		} else {
			delete(fill, f.cluster)
		}
		m.filling.Store(&fill)
		m.mu.Unlock()
		for _, g := range gates {
			g.activate(now, func(c string) bool { return c == f.cluster })
		}
		b.left--
	}
	if b.left > 0 {
		return
	}
	// The keys of clusters without sharded informers flow once every
	// cluster's caches have filled.
	for _, g := range gates {
		g.activate(now, func(c string) bool { return !b.clusters[c] })
	}
	r.activate(b.slots.Intersect(r.c.inState(slotStarting)))
}

// activate marks slots whose caches have filled in every cluster active.
func (r *run) activate(slots slots.Set) {
	if slots.Len() == 0 {
		return
	}
	m := r.m
	r.c.set(r.clk.Now(), slots, slotActive)
	active := m.activeNow().Union(slots)
	m.active.Store(&active)
	m.log.Info("Slots active", "slots", slots.String(), "active", active.String())
}

// release takes slots out of scope and drains them in the background:
// controllers stop taking their keys and finish the ones in flight, then
// the informers drop their objects.
func (r *run) release(now time.Time, slots slots.Set) {
	m := r.m
	r.c.set(now, slots, slotReleasing)
	active := m.activeNow().Minus(slots)
	m.active.Store(&active)
	m.mu.Lock()
	scope := m.inScope().Minus(slots)
	m.scope.Store(&scope)
	fill := maps.Clone(*m.filling.Load())
	for c, f := range fill {
		if rest := f.Minus(slots); rest.Len() > 0 {
			fill[c] = rest
		} else {
			delete(fill, c)
		}
	}
	m.filling.Store(&fill)
	m.mu.Unlock()
	m.log.Info("Releasing slots", "slots", slots.String(), "scope", scope.String())
	r.draining++
	began := r.clk.Now()
	infs, gates := m.snapshot()
	ctx := r.drainCtx
	r.drains.Go(func() {
		for _, g := range gates {
			_ = g.restrict(ctx)
		}
		dropped := 0
		for _, a := range infs {
			dropped += a.r.Refilter()
		}
		// The watches still send the slots given up, until they reconnect
		// with the narrower selector: reconnect now (a relist of this
		// replica's share), unless the server does not filter anyway.
		if !m.cfg.ClientSideOnly && m.serverSharding.Load() != shardingOff && m.inScope().Len() > 0 {
			for _, a := range infs {
				a.r.Relist()
			}
		}
		m.m.handoverDuration.WithLabelValues("out").Observe(r.clk.Since(began).Seconds())
		m.log.Info("Slots drained", "slots", slots.String(), "objectsDropped", dropped)
		r.released <- slots
	})
}

func (r *run) finishRelease(s slots.Set) {
	r.draining--
	r.m.m.handovers.WithLabelValues("out").Add(float64(s.Len()))
	r.c.set(r.clk.Now(), s, slotFree)
}

func (r *run) waitDrains() {
	done := make(chan struct{})
	go func() {
		r.drains.Wait()
		close(done)
	}()
	for {
		select {
		case <-done:
			return
		case <-r.released:
		}
	}
}

// collect deletes the Leases that members left behind (see core.stale),
// each at most once per resourceVersion.
func (r *run) collect(ctx context.Context, now time.Time) {
	for _, rec := range r.c.stale(now) {
		if r.collected[rec.Name] == rec.RV {
			continue
		}
		r.collected[rec.Name] = rec.RV
		ctx, cancel := context.WithTimeout(ctx, r.bound())
		rv := rec.RV
		err := r.m.leases.Delete(ctx, r.m.cfg.Namespace, rec.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
		cancel()
		switch {
		case err == nil:
			r.m.log.Info("Deleted the Lease of a member gone for good", "lease", rec.Name, "holder", rec.Identity)
		case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		default:
			r.m.log.Warn("Deleting the Lease of a member gone for good failed", "lease", rec.Name, "err", err)
		}
	}
}

func (r *run) deleteLease(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, r.m.cfg.RenewDeadline)
	defer cancel()
	if err := r.m.leases.Delete(ctx, r.m.cfg.Namespace, r.m.name, r.own.Preconditions()); err != nil && !apierrors.IsNotFound(err) {
		r.m.log.Warn("Deleting the member Lease failed; it will expire", "err", err)
	}
}

// report publishes the member's state for Status and the metrics.
func (r *run) report(now time.Time) {
	m := r.m
	rows := r.c.view(now)
	live := 0
	for _, row := range rows {
		if row.Live {
			live++
		}
	}
	infs, _ := m.snapshot()
	st := Status{
		Group:    m.cfg.Group,
		Identity: m.cfg.Identity,
		Slots:    m.cfg.Slots,
		Key:      m.cfg.Key,
		Joined:   r.c.joined() && !r.c.lost(now),
		Blocked:  r.c.blocked(now),
		Leaving:  r.c.leaving,
		Scope:    m.inScope().Slots(),
		Active:   m.activeNow().Slots(),
		Members:  rows,
	}
	st.Settled = st.Joined && !st.Blocked && !st.Leaving && r.draining == 0 &&
		r.c.inState(slotClaiming, slotStarting, slotReleasing).Len() == 0 &&
		len(st.Scope) == rows[0].Assigned
	for _, a := range infs {
		inf := a.r
		is := InformerStatus{Name: inf.Name(), Objects: inf.Len()}
		if a.cluster != "" {
			is.Name = a.cluster + ": " + is.Name
		}
		switch {
		case len(st.Scope) == st.Slots:
			is.Filtering = "none"
		case m.cfg.ClientSideOnly:
			is.Filtering = "client"
		case inf.ListMeta().ShardInfo != nil:
			is.Filtering = "server"
		default:
			// Lists of custom resources carry no ShardInfo: go by what
			// the server said of the Leases' list.
			switch m.serverSharding.Load() {
			case shardingOn:
				is.Filtering = "server"
			case shardingOff:
				is.Filtering = "client"
			default:
				is.Filtering = "unknown"
			}
		}
		st.Informers = append(st.Informers, is)
	}
	m.mu.Lock()
	m.status = st
	close(m.statusCh)
	m.statusCh = make(chan struct{})
	m.mu.Unlock()
	for i, name := range slotStateNames {
		m.m.slots.WithLabelValues(name).Set(float64(r.c.inState(slotState(i)).Len()))
	}
	m.m.members.Set(float64(live))
}
