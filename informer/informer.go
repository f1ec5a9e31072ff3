package informer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/internal/memlimit"
	"github.com/kloop-dev/kloop/watcher"
)

// Source produces the ordered event stream an informer consumes.
// *watcher.Reflector[T] is the Source for a real API server; tests can script
// one.
//
// Run must call emit from one goroutine, in stream order, starting with a
// snapshot (RelistStart, RelistItem…, RelistDone), until ctx is done, and
// return only then (nil), or at once with an error if it cannot run at all.
// It hands ownership of each emitted object to the informer. LastError is
// the latest list/watch failure, nil once healthy; it may be called from any
// goroutine.
type Source[T watcher.Object] interface {
	Run(ctx context.Context, emit func(watcher.Event[T])) error
	LastError() error
}

var _ Source[watcher.Object] = (*watcher.Reflector[watcher.Object])(nil)

// errorNotifier is an optional interface of a Source: ErrorChanged returns
// a channel that is closed the next time LastError changes. With it,
// WaitForSync returns as soon as the API server refuses the informer,
// rather than when its context ends. *watcher.Reflector implements it.
type errorNotifier interface {
	ErrorChanged() <-chan struct{}
}

var _ errorNotifier = (*watcher.Reflector[watcher.Object])(nil)

// Memory chooses how much memory cached objects take. The zero value is
// the lean default. KeepManagedFields and Unshared each give up one of its
// savings; Encoded goes below it, at a price on every read. It is the one
// place for these choices: Options and FactoryOptions both hold a Memory,
// and a factory's informers pass it down to their decoders.
type Memory struct {
	// KeepManagedFields keeps metadata.managedFields in cached objects. By
	// default they are removed before an object is stored or queued (and
	// OfResource, reading protobuf, never decodes them): they are often
	// the largest part of an object's metadata and controllers rarely read
	// them.
	KeepManagedFields bool
	// Unshared gives every cached object its own copy of everything. By
	// default, strings that repeat across objects (namespace, label and
	// annotation keys, label values, type and owner information, the keys
	// of a ConfigMap's or Secret's data) and identical label sets,
	// annotation sets of short values, owner-reference lists and parts of
	// pod specs (the containers' env, ports, resources, probes and mounts,
	// the volumes' sources, tolerations, node selector: what the replicas
	// of one ReplicaSet repeat, in Pods and in the kinds with a pod
	// template) are stored once and shared by every object that has them,
	// which saves hundreds of bytes per object (two thirds of a
	// Deployment's pod), and each object's own name, generateName, UID and
	// resourceVersion are packed into one allocation. That is safe because
	// cached objects are read-only; it also means that a program that
	// breaks that rule and modifies a cached object's labels (or a pod's
	// env) in place changes them for other objects too; the mutation
	// detector (cache.MutationDetectorEnv) reports it.
	Unshared bool
	// Encoded keeps cached objects as their protobuf encoding (without
	// managedFields) and decodes one on every read: each Get, List and
	// ByIndex returns new objects, decoded from the cache (under a
	// microsecond of CPU for a small ConfigMap; a List of many objects
	// costs that many). An object then takes little more than its encoded
	// size, where a decoded one takes about twice that. Handlers get the
	// decoded objects of the watch stream; a snapshot's new objects (the
	// first list, a relist, the cache replayed to a handler added later)
	// they get decoded from the cache one at a time as each is delivered, so
	// that the decoded form of the whole snapshot is never held. It
	// needs a protobuf type (the built-in types; custom resources are
	// not), and Unshared has no effect with it. See cache.Options.Encoded.
	//
	// The read cost, measured on 100,000 small ConfigMaps (BENCHMARKS.md):
	// a Get takes about 1.1 µs of CPU against 0.1 µs decoded, a List of
	// all of them about 110 ms against 0.3 ms; the cache takes about half
	// the decoded one's bytes (660 B an object against 1,211) and the
	// first sync peaks 0.8 as high.
	Encoded bool
	// EncodedUnder switches an informer to the encoded cache (as Encoded)
	// when the memory budget, when the informer is made, is under this
	// many bytes: for a program that should keep its reads fast where
	// memory allows and still fit where it is short. The budget is Budget
	// if set, else the Go memory limit (runtime/debug.SetMemoryLimit,
	// $GOMEMLIMIT) if one is set, else the Go memory limit kloop.App.Run
	// derives from the container's limit (90% of cgroup memory.max or
	// memory.limit_in_bytes); with none of them there is no budget and
	// the cache stays decoded. A type without protobuf (a custom
	// resource) stays decoded too. New logs which cache it chose and why;
	// Status.Encoded says it. 0 never switches.
	EncodedUnder int64
	// Budget is the memory budget EncodedUnder is compared with, in bytes;
	// 0 finds it as EncodedUnder says. kloop.App sets it to the Go memory
	// limit its Run sets.
	Budget int64
}

// encoded decides whether an informer of type T keeps the encoded cache,
// and says why when it is EncodedUnder's doing.
func (m Memory) encoded() (bool, string) {
	if m.Encoded || m.EncodedUnder <= 0 {
		return m.Encoded, ""
	}
	budget, from := m.Budget, "Memory.Budget"
	if budget <= 0 {
		if l := debug.SetMemoryLimit(-1); l < math.MaxInt64 {
			budget, from = l, "the Go memory limit"
		} else if d := memlimit.Decide(0, os.Getenv, os.DirFS("/")); d.Limit > 0 {
			budget, from = d.Limit, "the Go memory limit kloop.App.Run sets: "+d.Why
		} else {
			return false, "no memory budget (" + d.Why + "), so the decoded cache"
		}
	}
	if budget < m.EncodedUnder {
		return true, fmt.Sprintf("the memory budget of %d bytes (%s) is under Memory.EncodedUnder, %d", budget, from, m.EncodedUnder)
	}
	return false, fmt.Sprintf("the memory budget of %d bytes (%s) is not under Memory.EncodedUnder, %d, so the decoded cache", budget, from, m.EncodedUnder)
}

// Options configures an Informer. The zero value works: no extra indexes,
// managedFields stripped, logs to slog.Default, metrics to the kloop
// registry.
type Options[T watcher.Object] struct {
	// Name identifies the informer in logs, metrics and errors, e.g.
	// "configmaps in namespace web". Default: the Go type of T.
	Name string
	// Indexes are extra cache indexes (see cache.Options). More can be added
	// later with AddIndex.
	Indexes map[string]cache.IndexFunc[T]
	// Memory chooses how lean cached objects are. The zero value is
	// leanest: managedFields stripped, repeated metadata shared.
	Memory Memory
	// Transform, if set, is the informer's transform (see SetTransform,
	// which sets it on an informer from a Factory).
	Transform func(T) T
	// Filter, if set, says which objects the informer keeps: the others are
	// neither cached nor notified. It sees objects as they arrive, before
	// Transform, and must be fast. Its answers must not change while the
	// informer runs; a factory's Restrict (the sharding package's) is the
	// filter that may, and it drops what it no longer accepts and relists
	// for what it accepts anew.
	Filter func(T) bool
	// Logger receives structured logs, with key "informer" set to Name.
	// Default: slog.Default().
	Logger *slog.Logger
	// Registerer receives the informer's metrics. Default: the kloop
	// metrics registry.
	Registerer prometheus.Registerer
}

// Informer keeps a cache of one resource current from a Source and
// notifies handlers of every change. See the package documentation.
type Informer[T watcher.Object] struct {
	name      string
	src       Source[T]
	store     *cache.Store[T]
	writer    *cache.Writer[T]
	strip     bool      // drop managedFields
	intern    *interner // nil: Memory.Unshared
	size      *sizer    // the cache's bytes, estimated from a sample
	encoded   bool      // the cache keeps encodings (Memory.Encoded, EncodedUnder)
	cacheWhy  string    // why the cache is (or is not) encoded: Status.CacheWhy
	pacer     snapshotPacer
	transform func(T) T // the user's; set before Start only
	filter    func(T) bool
	logger    *slog.Logger
	metrics   *informerMetrics

	// Relist requests (see Relist). srcEpoch is the request the running
	// Source started after; appliedEpoch (under dispatchMu) the newest one a
	// snapshot answered.
	relistMu      sync.Mutex
	relistEpoch   uint64
	relistWaiters []relistWaiter
	cancelSrc     context.CancelFunc
	srcDone       bool // runSource returned: no snapshot will come
	srcEpoch      atomic.Uint64
	appliedEpoch  uint64

	// The delta queue; the reflector's goroutine pushes, the processor pops.
	qmu   sync.Mutex
	queue deltaQueue[T]
	qwake chan struct{}

	// dispatchMu is held while a change is applied to the cache and fanned
	// out, and while a handler is added or replayed to, so that each handler
	// sees the cache's history as one consistent sequence.
	dispatchMu sync.Mutex
	subs       []subscriber[T]   // registration order
	ops        []op[T]           // applySome's batch, reused
	changes    []cache.Change[T] // applyDeltas' writes, reused
	synced     bool
	// pruneSubs: an inline registration was removed; it is dropped from
	// subs the next time the lock is taken to apply a change. Its Remove
	// cannot take dispatchMu: it may be called from the handler itself.
	pruneSubs atomic.Bool
	syncedCh  chan struct{}
	stoppedCh chan struct{} // closed when Start returns

	// Lifecycle.
	mu      sync.Mutex
	state   runState
	runCtx  context.Context // Start's own context, while running
	wg      sync.WaitGroup
	handled int // registrations so far, for default names
}

type relistWaiter struct {
	epoch uint64
	done  chan struct{}
}

type runState uint8

const (
	stateNew runState = iota
	stateRunning
	stateStopped
)

// New returns an informer over src. It starts nothing; call Start.
func New[T watcher.Object](src Source[T], opts Options[T]) (*Informer[T], error) {
	if src == nil {
		return nil, errors.New("informer: nil Source")
	}
	name := opts.Name
	if name == "" {
		var zero T
		name = fmt.Sprintf("%T", zero)
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	encoded, why := opts.Memory.encoded()
	store, writer, err := cache.New(cache.Options[T]{Indexes: opts.Indexes, Encoded: encoded})
	if err != nil && encoded && !opts.Memory.Encoded {
		// EncodedUnder asks for the encoded cache only where it can be had.
		why = fmt.Sprintf("%s, but the decoded cache: %v", why, err)
		encoded = false
		store, writer, err = cache.New(cache.Options[T]{Indexes: opts.Indexes})
	}
	if err != nil {
		return nil, err
	}
	if why != "" {
		logger.Info("informer cache chosen", "informer", name, "encoded", encoded, "why", why)
	}
	if why == "" && encoded {
		why = "Memory.Encoded is set"
	}
	opts.Memory.Encoded = encoded
	m, err := newInformerMetrics(opts.Registerer, name)
	if err != nil {
		logger.Warn("informer metrics not registered", "informer", name, "err", err)
	}
	var in *interner
	if !opts.Memory.Unshared && !opts.Memory.Encoded {
		// An encoded cache keeps no decoded object that sharing would
		// make smaller.
		in = newInterner()
	}
	inf := &Informer[T]{
		name:      name,
		src:       src,
		store:     store,
		writer:    writer,
		strip:     !opts.Memory.KeepManagedFields,
		intern:    in,
		size:      newSizer(opts.Memory.Encoded),
		encoded:   opts.Memory.Encoded,
		cacheWhy:  why,
		transform: opts.Transform,
		filter:    opts.Filter,
		logger:    logger,
		metrics:   m,
		qwake:     make(chan struct{}, 1),
		syncedCh:  make(chan struct{}),
		stoppedCh: make(chan struct{}),
	}
	inf.queue.newSnapshot = writer.NewSnapshot
	return inf, nil
}

// Name describes the informer.
func (inf *Informer[T]) Name() string { return inf.name }

// String implements fmt.Stringer.
func (inf *Informer[T]) String() string { return "informer " + inf.name }

// Lister reads the informer's cache. Objects it returns are read-only.
func (inf *Informer[T]) Lister() cache.Lister[T] { return inf.store }

// Synced is closed once the first snapshot has been applied to the cache.
// Handlers may still be busy with it: see Registration.Synced.
func (inf *Informer[T]) Synced() <-chan struct{} { return inf.syncedCh }

// WaitForSync blocks until the first snapshot has been applied to the
// cache or ctx is done. Then it returns a *SyncError naming the informer,
// wrapping its last list/watch error (so that apierrors.IsForbidden works
// on the result) and context.Cause(ctx).
//
// It also returns at once if the informer stops without having synced, and
// as soon as the API server refuses it (403 Forbidden; the error wraps
// ErrRefused and the server's message, which names the user, the verb and
// the resource). The informer itself goes on retrying with backoff, so it
// syncs if permission is granted later: call WaitForSync again to wait for
// that.
func (inf *Informer[T]) WaitForSync(ctx context.Context) error {
	return inf.waitFor(ctx, inf.syncedCh, inf.name)
}

// waitFor waits for synced and explains why it did not close.
func (inf *Informer[T]) waitFor(ctx context.Context, synced <-chan struct{}, what string) error {
	notifier, _ := inf.src.(errorNotifier)
	var waited error
wait:
	for {
		var changed <-chan struct{}
		if notifier != nil {
			changed = notifier.ErrorChanged() // before LastError: no change is missed
		}
		if err := inf.src.LastError(); refused(err) {
			select {
			case <-synced:
				return nil
			default:
			}
			return &SyncError{Informer: what, Err: err, Waited: ErrRefused}
		}
		select {
		case <-synced:
			return nil
		case <-ctx.Done():
			waited = context.Cause(ctx)
			break wait
		case <-inf.stoppedCh:
			waited = ErrStopped
			break wait
		case <-changed:
		}
	}
	select {
	case <-synced:
		return nil
	default:
	}
	cause := inf.src.LastError()
	if cause == nil {
		inf.mu.Lock()
		if inf.state == stateNew {
			cause = ErrNotStarted
		}
		inf.mu.Unlock()
	}
	return &SyncError{Informer: what, Err: cause, Waited: waited}
}

// Start runs the informer until ctx is done: the Source, the goroutine that
// applies its events to the cache, and one goroutine per handler. It
// returns when all of them have exited: nil when ctx ended it, the Source's
// error if it failed to run, ErrAlreadyStarted on a second call.
func (inf *Informer[T]) Start(ctx context.Context) error {
	inf.mu.Lock()
	if inf.state != stateNew {
		inf.mu.Unlock()
		return ErrAlreadyStarted
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	inf.state, inf.runCtx = stateRunning, runCtx
	inf.dispatchMu.Lock()
	for _, sub := range inf.subs {
		if l, ok := sub.(*listener[T]); ok {
			inf.startLocked(l)
		}
	}
	inf.dispatchMu.Unlock()
	inf.wg.Go(func() { inf.process(runCtx) })
	inf.mu.Unlock()

	err := inf.runSource(runCtx)
	cancel()

	inf.mu.Lock()
	inf.state, inf.runCtx = stateStopped, nil
	inf.mu.Unlock()
	inf.wg.Wait()
	close(inf.stoppedCh)
	inf.dispatchMu.Lock() // a Refilter may still write
	for _, sub := range inf.subs {
		if in, ok := sub.(*inline[T]); ok {
			in.informerStopped()
		}
	}
	// Every cached object gets one last look from the mutation detector
	// (which is on in tests only).
	_ = inf.writer.CheckMutations()
	inf.dispatchMu.Unlock()
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("informer %s: %w", inf.name, err)
	}
	return nil
}

// runSource runs the Source until runCtx is done, starting it again after
// each Relist request.
func (inf *Informer[T]) runSource(runCtx context.Context) error {
	for {
		srcCtx, cancelSrc := context.WithCancel(runCtx)
		inf.relistMu.Lock()
		inf.cancelSrc = cancelSrc
		inf.srcEpoch.Store(inf.relistEpoch)
		inf.relistMu.Unlock()
		err := inf.src.Run(srcCtx, inf.emit)
		inf.relistMu.Lock()
		inf.cancelSrc = nil
		inf.relistMu.Unlock()
		cancelSrc()
		if err != nil || runCtx.Err() != nil {
			inf.relistMu.Lock()
			inf.srcDone = true
			for _, w := range inf.relistWaiters {
				close(w.done)
			}
			inf.relistWaiters = nil
			inf.relistMu.Unlock()
			return err
		}
		// Stopped for a Relist: a snapshot cut short is not one.
		inf.qmu.Lock()
		inf.queue.abortRelist()
		inf.qmu.Unlock()
	}
}

// relist makes the informer take a new snapshot from its Source, as it did
// when it started: the Source is stopped and run again. The returned
// channel is closed once a snapshot taken after the call has been applied
// to the cache (or the informer has stopped). Use it when Filter, or a
// parameter the Source sends (see Restriction), now accepts objects that
// were left out: they arrive through the snapshot and reach handlers as
// Added events with Replay set, like the objects of a first snapshot, since to this
// informer they are not new, only newly in view. Objects that did not change are not
// notified. Before Start, the first snapshot answers it.
func (inf *Informer[T]) relist() <-chan struct{} {
	inf.relistMu.Lock()
	defer inf.relistMu.Unlock()
	inf.relistEpoch++
	done := make(chan struct{})
	if inf.srcDone {
		close(done)
		return done
	}
	inf.relistWaiters = append(inf.relistWaiters, relistWaiter{epoch: inf.relistEpoch, done: done})
	if inf.cancelSrc != nil {
		inf.cancelSrc()
	}
	return done
}

// refilter drops from the cache, at once, every object Filter now
// rejects, and returns how many it dropped. Handlers are not told: the
// objects were not deleted, they are only no longer this informer's (a
// notification already queued for one may still be delivered). If Filter
// accepts such an object again later, it comes back through a Relist as
// an Added event with Replay set. Without a Filter it does nothing.
func (inf *Informer[T]) refilter() int {
	if inf.filter == nil {
		return 0
	}
	inf.dispatchMu.Lock()
	defer inf.dispatchMu.Unlock()
	dropped := 0
	for _, obj := range inf.store.List(nil) {
		if !inf.filter(obj) {
			inf.writer.Delete(obj, obj.GetResourceVersion())
			dropped++
		}
	}
	inf.metrics.objects.Set(float64(inf.store.Len()))
	return dropped
}

// listMeta is the metadata of the Source's latest LIST page (see
// watcher.Reflector.listMeta): what the API server made of the parameters
// a Restriction adds, for one. It is zero when the Source cannot tell.
func (inf *Informer[T]) listMeta() metav1.ListMeta {
	if s, ok := inf.src.(interface{ ListMeta() metav1.ListMeta }); ok {
		return s.ListMeta()
	}
	return metav1.ListMeta{}
}

// startLocked starts l's goroutine. Caller holds mu, and Start is running.
func (inf *Informer[T]) startLocked(l *listener[T]) {
	if l.started || l.removed {
		return
	}
	l.started = true
	ctx := inf.runCtx
	inf.wg.Go(func() { l.run(ctx) })
}

// SetTransform sets the informer's transform: fn is applied to every
// object the informer receives (from the initial list, every relist and
// every watch event, deletions included), before the object is queued,
// stored or handed to a handler, so that the cache keeps only what fn
// returns. That is the way to keep just the fields a controller reads:
//
//	configMaps.SetTransform(func(cm *corev1.ConfigMap) *corev1.ConfigMap {
//		cm.Data = nil // this controller reads only the labels and BinaryData keys
//		return cm
//	})
//
// fn gets each object after managedFields are stripped (unless
// Memory.KeepManagedFields) and before repeated metadata is shared, while
// the informer is its only holder: it may change the object in place, or
// return another one, which must have the same namespace and name (the
// cache keys by them). It runs on the reflector's goroutine, one object at
// a time, and must neither block nor panic.
//
// SetTransform must be called before Start (ErrAlreadyStarted otherwise)
// and only once: informers from a Factory are shared, and a second
// transform would silently undo the first, so it fails with
// ErrTransformSet.
func (inf *Informer[T]) SetTransform(fn func(T) T) error {
	if fn == nil {
		return errors.New("informer: nil transform")
	}
	inf.mu.Lock()
	defer inf.mu.Unlock()
	switch {
	case inf.state != stateNew:
		return fmt.Errorf("informer %s: SetTransform: %w", inf.name, ErrAlreadyStarted)
	case inf.transform != nil:
		return fmt.Errorf("informer %s: %w", inf.name, ErrTransformSet)
	}
	inf.transform = fn
	return nil
}

// prepare readies an object for the queue and the cache: managedFields
// stripped, the user's transform, repeated metadata shared. It runs on the
// reflector's goroutine.
func (inf *Informer[T]) prepare(obj T) T {
	if inf.strip {
		obj.SetManagedFields(nil)
	}
	if inf.transform != nil {
		obj = inf.transform(obj)
	}
	if inf.intern != nil {
		inf.intern.object(obj)
	}
	inf.size.observe(obj)
	return obj
}

// emit is the Source's callback: it only queues, so the reflector is never
// held up by the cache or the handlers.
func (inf *Informer[T]) emit(ev watcher.Event[T]) {
	switch ev.Type {
	case watcher.Added, watcher.Modified, watcher.Deleted, watcher.RelistItem:
		if inf.filter != nil && !inf.filter(ev.Object) {
			// Out of view: not worth queueing. A change of Filter is
			// checked again when events are applied.
			inf.metrics.filtered.Inc()
			return
		}
		ev.Object = inf.prepare(ev.Object)
	}
	inf.qmu.Lock()
	if ev.Type == watcher.RelistStart {
		inf.queue.epoch = inf.srcEpoch.Load()
	}
	protocolErr := inf.queue.push(ev)
	depth := inf.queue.pending()
	inf.qmu.Unlock()
	if protocolErr {
		inf.logger.Warn("informer: event out of list/watch protocol; unfinished relist dropped", "informer", inf.name, "type", ev.Type.String())
	}
	if ev.Type == watcher.RelistItem {
		inf.pacer.step()
	}
	if ev.Type == watcher.RelistStart || ev.Type == watcher.RelistItem {
		return // nothing for the processor until RelistDone
	}
	inf.metrics.queueDepth.Set(float64(depth))
	select {
	case inf.qwake <- struct{}{}:
	default:
	}
}

// applyBatch bounds how many queued changes process pops at once and
// applies under one hold of dispatchMu (the deltas among them under one
// hold of the cache's lock), setting the informer's gauges once for all of
// them.
const applyBatch = 128

// process applies queued events to the cache and fans them out.
func (inf *Informer[T]) process(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-inf.qwake:
		}
		for ctx.Err() == nil && inf.applySome() {
		}
	}
}

// applySome pops up to applyBatch queued changes under one hold of qmu and
// applies them under one hold of dispatchMu, the deltas among them written
// to the cache under one hold of its lock, and reports whether it applied
// any. A change queued meanwhile takes its place behind the keys still
// waiting, as the delta queue's order promises: a popped key queued again
// goes to the back.
func (inf *Informer[T]) applySome() bool {
	inf.dispatchMu.Lock()
	defer inf.dispatchMu.Unlock()
	inf.pruneLocked()
	ops := inf.ops[:0]
	inf.qmu.Lock()
	for len(ops) < applyBatch {
		o, ok := inf.queue.pop()
		if !ok {
			break
		}
		ops = append(ops, o)
	}
	depth := inf.queue.pending()
	inf.qmu.Unlock()
	if len(ops) == 0 {
		return false
	}
	for i := 0; i < len(ops); {
		if ops[i].kind != opDelta {
			inf.applyLocked(&ops[i])
			i++
			continue
		}
		j := i
		for j < len(ops) && ops[j].kind == opDelta {
			j++
		}
		inf.applyDeltas(ops[i:j])
		i = j
	}
	clear(ops)
	inf.ops = ops[:0]
	inf.metrics.queueDepth.Set(float64(depth))
	objs := inf.store.Len()
	inf.metrics.objects.Set(float64(objs))
	inf.metrics.cacheBytes.Set(float64(inf.size.bytes(objs)))
	inf.metrics.setRV(inf.store.ResourceVersion())
	return true
}

// applyDeltas writes deltas to the cache at once, then fans out what
// changed. Caller holds dispatchMu.
func (inf *Informer[T]) applyDeltas(ops []op[T]) {
	ch := inf.changes[:0]
	for i := range ops {
		d := &ops[i].delta
		if inf.filter != nil && !inf.filter(d.obj) {
			d.outOfView = true // dropped, not deleted: no event
		}
		ch = append(ch, cache.Change[T]{Obj: d.obj, Delete: d.deleted || d.outOfView, RV: ops[i].rv})
	}
	inf.writer.Write(ch)
	for i := range ops {
		d, c := &ops[i].delta, &ch[i]
		switch {
		case d.outOfView:
		case d.deleted:
			switch {
			case !c.Existed:
			case d.obj.GetUID() == "" || c.Old.GetUID() == d.obj.GetUID():
				inf.metrics.deletes.Inc()
				inf.fanOut(cache.Event[T]{Kind: cache.Deleted, Old: d.obj})
			default: // the key held an incarnation whose delete we never saw
				inf.metrics.deletesUnknown.Inc()
				inf.fanOut(cache.Event[T]{Kind: cache.Deleted, Old: c.Old, FinalStateUnknown: true})
			}
		case !c.Existed:
			inf.metrics.adds.Inc()
			inf.fanOut(cache.Event[T]{Kind: cache.Added, New: d.obj, Merged: d.merged})
		case c.Old.GetUID() == d.obj.GetUID():
			inf.metrics.updates.Inc()
			inf.fanOut(cache.Event[T]{Kind: cache.Updated, Old: c.Old, New: d.obj, Merged: d.merged})
		default: // deleted and re-created while the deletion was coalesced away
			inf.metrics.deletesUnknown.Inc()
			inf.metrics.adds.Inc()
			inf.fanOut(cache.Event[T]{Kind: cache.Deleted, Old: c.Old, FinalStateUnknown: true})
			inf.fanOut(cache.Event[T]{Kind: cache.Added, New: d.obj, Merged: true})
		}
	}
	clear(ch)
	inf.changes = ch[:0]
}

// applyLocked applies a snapshot or a bookmark (deltas go through
// applyDeltas). Caller holds dispatchMu.
func (inf *Informer[T]) applyLocked(o *op[T]) {
	switch o.kind {
	case opSnapshot:
		initial := !inf.synced
		// Adds of a snapshot taken for a Relist are objects coming into
		// view, not new ones.
		replay := o.snapshot.epoch > inf.appliedEpoch
		if inf.filter != nil {
			o.snapshot.objs.Retain(inf.filter)
		}
		// An encoded cache reports the objects it did not hold by key, so
		// that they are decoded one at a time as each handler takes them.
		events, added := inf.writer.ReplaceLazily(o.snapshot.objs, o.snapshot.rv)
		if inf.filter != nil {
			events = slices.DeleteFunc(events, func(e cache.Event[T]) bool {
				return e.Kind == cache.Deleted && !inf.filter(e.Old) // out of view, not deleted (see Refilter)
			})
		}
		if initial {
			// The cache holds the first snapshot, which is what Synced
			// says. The handlers hear of it next; each registration's
			// Synced tells when one has been through it.
			inf.synced = true
			close(inf.syncedCh)
			inf.logger.Debug("informer synced", "informer", inf.name, "objects", inf.store.Len(), "rv", o.snapshot.rv)
		}
		adds, updates, deletes := len(added), 0, 0
		for i, e := range events {
			switch e.Kind {
			case cache.Added:
				adds++
				// The state handlers start from, or objects coming into
				// view: not new to them.
				events[i].Replay = initial || replay
			case cache.Updated:
				updates++
			case cache.Deleted:
				deletes++
			}
		}
		inf.metrics.adds.Add(float64(adds))
		inf.metrics.updates.Add(float64(updates))
		inf.metrics.deletesUnknown.Add(float64(deletes))
		for _, sub := range inf.subs {
			sub.notifyAll(events)
			sub.notifyKeys(added, initial || replay)
			if initial {
				sub.markSynced()
			}
		}
		if o.snapshot.epoch > inf.appliedEpoch {
			inf.appliedEpoch = o.snapshot.epoch
		}
		inf.relistMu.Lock()
		inf.relistWaiters = slices.DeleteFunc(inf.relistWaiters, func(w relistWaiter) bool {
			if w.epoch <= o.snapshot.epoch {
				close(w.done)
				return true
			}
			return false
		})
		inf.relistMu.Unlock()
	case opBookmark:
		inf.writer.Bookmark(o.bookmark)
	}
}

// fanOut hands e to every registration: queued for a listener, called for
// an inline handler. Caller holds dispatchMu.
func (inf *Informer[T]) fanOut(e cache.Event[T]) {
	for _, sub := range inf.subs {
		sub.notify(e)
	}
}

// pruneLocked drops removed inline registrations from subs. Caller holds
// dispatchMu.
func (inf *Informer[T]) pruneLocked() {
	if inf.pruneSubs.Swap(false) {
		inf.subs = slices.DeleteFunc(inf.subs, subscriber[T].gone)
	}
}

// AddHandler subscribes h to the informer. If the informer has synced, h
// first gets the current contents of the cache as Added events with Replay
// set; otherwise it gets the first snapshot like every other handler. It
// can be called before or while the informer runs, and fails with
// ErrStopped after Start has returned. With HandlerOptions.Inline, the
// contents of the cache are handed to h before AddHandler returns.
func (inf *Informer[T]) AddHandler(h Handler[T], opts HandlerOptions) (*Registration, error) {
	if h == nil {
		return nil, errors.New("informer: nil Handler")
	}
	if opts.Inline && opts.ReplayInterval > 0 {
		return nil, fmt.Errorf("informer %s: HandlerOptions.ReplayInterval needs a handler with a goroutine of its own: drop Inline or the interval", inf.name)
	}
	inf.mu.Lock()
	defer inf.mu.Unlock()
	if inf.state == stateStopped {
		return nil, fmt.Errorf("informer %s: %w", inf.name, ErrStopped)
	}
	inf.handled++
	name := opts.Name
	if name == "" {
		name = "handler-" + strconv.Itoa(inf.handled)
	}
	var (
		sub subscriber[T]
		reg registrant
		l   *listener[T]
	)
	if opts.Inline {
		in := newInline(inf, h, name)
		sub, reg = in, in
	} else {
		l = newListener(inf, h, name, opts.ReplayInterval)
		sub, reg = l, l
	}

	inf.dispatchMu.Lock()
	inf.pruneLocked()
	inf.subs = append(inf.subs, sub)
	if inf.synced {
		if keys, ok := inf.store.EncodedKeys(); ok {
			sub.notifyKeys(keys, true) // an encoded cache: decoded as delivered
		} else {
			events := make([]cache.Event[T], 0, inf.store.Len())
			for _, obj := range inf.store.List(nil) {
				events = append(events, cache.Event[T]{Kind: cache.Added, New: obj, Replay: true})
			}
			sub.notifyAll(events)
		}
		sub.markSynced()
	}
	inf.dispatchMu.Unlock()

	if l != nil && inf.state == stateRunning {
		inf.startLocked(l)
	}
	return &Registration{r: reg}, nil
}

// removeListener unsubscribes l; see Registration.Remove.
func (inf *Informer[T]) removeListener(l *listener[T]) {
	inf.dispatchMu.Lock()
	inf.subs = slices.DeleteFunc(inf.subs, func(x subscriber[T]) bool { return x == subscriber[T](l) })
	inf.dispatchMu.Unlock()

	inf.mu.Lock()
	l.removed = true
	started := l.started
	inf.mu.Unlock()
	l.remove(started)
}

// replayTo queues every cached object to l as an Updated event with
// Old == New and Replay set; an encoded cache's objects are decoded one at
// a time, as each is delivered.
func (inf *Informer[T]) replayTo(l *listener[T]) {
	inf.dispatchMu.Lock()
	defer inf.dispatchMu.Unlock()
	if !inf.synced {
		return
	}
	if keys, ok := inf.store.EncodedKeys(); ok {
		l.replayKeys(keys)
		return
	}
	for _, obj := range inf.store.List(nil) {
		l.push(cache.KeyOf(obj), note[T]{kind: noteUpdate, old: obj, obj: obj, replay: true})
	}
}

// AddIndex adds a cache index, filled from the current contents; it can be
// called at any time.
func (inf *Informer[T]) AddIndex(name string, fn cache.IndexFunc[T]) error {
	inf.dispatchMu.Lock()
	defer inf.dispatchMu.Unlock()
	return inf.writer.AddIndex(name, fn)
}

// Seed fills the cache with objs before the informer starts: known state
// from before this process (a checkpoint, or what a previous run handled).
// The first snapshot from the API server is then compared with the seed
// instead of with an empty cache, so handlers get only the difference: an
// Added event with Replay set for each object the seed lacks, an Updated
// (Old: seeded, New: listed) for each whose resourceVersion differs, and a
// Deleted with FinalStateUnknown for each seeded object that is gone;
// seeded objects that are unchanged are not notified. Seeded objects
// are not notified before that snapshot. Seed fails once Start has been
// called.
func (inf *Informer[T]) Seed(objs ...T) error {
	inf.mu.Lock()
	defer inf.mu.Unlock()
	if inf.state != stateNew {
		return fmt.Errorf("informer %s: Seed after Start: seed the cache before starting the informer", inf.name)
	}
	inf.dispatchMu.Lock()
	defer inf.dispatchMu.Unlock()
	for _, obj := range objs {
		if inf.transform != nil {
			obj = inf.transform(obj)
		}
		if inf.filter != nil && !inf.filter(obj) {
			continue
		}
		inf.writer.Apply(obj, obj.GetResourceVersion())
	}
	return nil
}
