package crcache

import (
	"errors"
	"fmt"
	"sync"
	"time"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/informer"
)

// sharedInformer is what GetInformer returns: controller-runtime's
// cache.Informer over the kloop informers of one kind (one per namespace
// the kind is cached in).
type sharedInformer struct {
	c *Cache
	e *entry
}

// AddEventHandler subscribes h with the kind's SyncPeriod as its replay
// interval.
func (s *sharedInformer) AddEventHandler(h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	return s.add(h, nil)
}

// AddEventHandlerWithResyncPeriod subscribes h, replaying the cache to it
// every period (0: never).
func (s *sharedInformer) AddEventHandlerWithResyncPeriod(h toolscache.ResourceEventHandler, period time.Duration) (toolscache.ResourceEventHandlerRegistration, error) {
	return s.add(h, &period)
}

// AddEventHandlerWithOptions subscribes h; of the options only
// ResyncPeriod means something here (kloop logs with log/slog).
func (s *sharedInformer) AddEventHandlerWithOptions(h toolscache.ResourceEventHandler, opts toolscache.HandlerOptions) (toolscache.ResourceEventHandlerRegistration, error) {
	return s.add(h, opts.ResyncPeriod)
}

func (s *sharedInformer) add(h toolscache.ResourceEventHandler, period *time.Duration) (toolscache.ResourceEventHandlerRegistration, error) {
	if h == nil {
		return nil, errors.New("crcache: nil ResourceEventHandler")
	}
	r := &registration{inf: s}
	for _, p := range s.e.parts {
		replay := p.resync
		if period != nil {
			replay = *period
		}
		if replay < 0 {
			replay = 0
		}
		reg, err := p.addHandler(func(ev cache.Event[client.Object]) { deliver(h, ev) }, informer.HandlerOptions{ReplayInterval: replay})
		if err != nil {
			for _, done := range r.regs {
				done.Remove()
			}
			return nil, err
		}
		r.regs = append(r.regs, reg)
	}
	return r, nil
}

// deliver hands a kloop event to a client-go handler as client-go would:
// a delete that was inferred from a relist comes as a
// DeletedFinalStateUnknown holding the last state known.
func deliver(h toolscache.ResourceEventHandler, ev cache.Event[client.Object]) {
	switch ev.Kind {
	case cache.Added:
		h.OnAdd(ev.New, ev.Replay)
	case cache.Updated:
		h.OnUpdate(ev.Old, ev.New)
	case cache.Deleted:
		if ev.FinalStateUnknown {
			h.OnDelete(toolscache.DeletedFinalStateUnknown{Key: storeKey(ev.Old), Obj: ev.Old})
			return
		}
		h.OnDelete(ev.Old)
	}
}

// storeKey is client-go's key of an object: namespace/name, or name.
func storeKey(obj client.Object) string {
	if ns := obj.GetNamespace(); ns != "" {
		return ns + "/" + obj.GetName()
	}
	return obj.GetName()
}

// RemoveEventHandler unsubscribes a handler this informer registered. It
// is idempotent; no callback begins after it returns.
func (s *sharedInformer) RemoveEventHandler(handle toolscache.ResourceEventHandlerRegistration) error {
	r, ok := handle.(*registration)
	if !ok || r.inf != s {
		return fmt.Errorf("crcache: RemoveEventHandler: %T is not a registration of this informer", handle)
	}
	for _, reg := range r.regs {
		reg.Remove()
	}
	return nil
}

// AddIndexers adds client-go index functions; an index function's error
// leaves the object out of that index (and is logged).
func (s *sharedInformer) AddIndexers(indexers toolscache.Indexers) error {
	for name, fn := range indexers {
		err := s.addIndex(name, func(obj client.Object) []string {
			vals, err := fn(obj)
			if err != nil {
				s.c.o.Logger.Error("index function failed", "index", name, "namespace", obj.GetNamespace(), "name", obj.GetName(), "err", err)
				return nil
			}
			return vals
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func (s *sharedInformer) addIndex(name string, fn func(client.Object) []string) error {
	for _, p := range s.e.parts {
		if err := p.addIndex(name, fn); err != nil {
			return fmt.Errorf("crcache: index %q of %s: %w", name, s.e.key.gvk, err)
		}
	}
	return nil
}

// HasSynced reports whether every informer of the kind has synced.
func (s *sharedInformer) HasSynced() bool { return allClosed(s.synced()) }

// HasSyncedChecker is HasSynced as a channel.
func (s *sharedInformer) HasSyncedChecker() toolscache.DoneChecker {
	return newDoneChecker(s.e.key.gvk.String(), s.synced(), s.e.stopped)
}

func (s *sharedInformer) synced() []<-chan struct{} {
	chs := make([]<-chan struct{}, len(s.e.parts))
	for i, p := range s.e.parts {
		chs[i] = p.synced()
	}
	return chs
}

// IsStopped reports whether the informer has stopped: removed, or its
// cache stopped.
func (s *sharedInformer) IsStopped() bool { return allClosed([]<-chan struct{}{s.e.stopped}) }

// Stopped is IsStopped as a channel: closed once the informer has stopped.
func (s *sharedInformer) Stopped() <-chan struct{} { return s.e.stopped }

// registration is a handler's subscription to every informer of a kind.
type registration struct {
	inf  *sharedInformer
	regs []*informer.Registration
}

// HasSynced reports whether the handler has been told of every object of
// the state it started from.
func (r *registration) HasSynced() bool { return allClosed(r.synced()) }

// HasSyncedChecker is HasSynced as a channel.
func (r *registration) HasSyncedChecker() toolscache.DoneChecker {
	return newDoneChecker(r.inf.e.key.gvk.String()+" handler", r.synced(), r.inf.e.stopped)
}

func (r *registration) synced() []<-chan struct{} {
	chs := make([]<-chan struct{}, len(r.regs))
	for i, reg := range r.regs {
		chs[i] = reg.Synced()
	}
	return chs
}

func allClosed(chs []<-chan struct{}) bool {
	for _, ch := range chs {
		select {
		case <-ch:
		default:
			return false
		}
	}
	return true
}

// doneChecker is a toolscache.DoneChecker closed when all of chs are. With
// more than one, a goroutine waits for them, until they close or stop
// does.
type doneChecker struct {
	name string
	once sync.Once
	chs  []<-chan struct{}
	stop <-chan struct{}
	done <-chan struct{}
}

func newDoneChecker(name string, chs []<-chan struct{}, stop <-chan struct{}) *doneChecker {
	return &doneChecker{name: name, chs: chs, stop: stop}
}

func (d *doneChecker) Name() string { return d.name }

func (d *doneChecker) Done() <-chan struct{} {
	d.once.Do(func() {
		if len(d.chs) == 1 {
			d.done = d.chs[0]
			return
		}
		done := make(chan struct{})
		d.done = done
		go func() {
			for _, ch := range d.chs {
				select {
				case <-ch:
				case <-d.stop:
					return
				}
			}
			close(done)
		}()
	})
	return d.done
}
