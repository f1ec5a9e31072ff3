package kindgate

import (
	"context"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiwatch "k8s.io/apimachinery/pkg/watch"

	"github.com/kloop-dev/kloop/watcher"
)

// Switch is what Guard and Gated use of a gate: a *Gate, as the informer
// factory gets it (informer.KindGate).
type Switch interface {
	State() (open bool, changed <-chan struct{})
	Shut(reason string) bool
	Err() error
}

var _ Switch = (*Gate)(nil)

// Guard returns lw with g watching its answers: a 404 (the resource is not
// served) shuts g, and the call then returns only when ctx ends, with
// ctx's error. It is meant for a ListerWatcher that runs under Gated with
// the same gate, which ends that context as the gate shuts: the reflector
// then stops without an error of its own.
func Guard[T watcher.Object](lw watcher.ListerWatcher[T], g Switch) watcher.ListerWatcher[T] {
	return guarded[T]{lw: lw, g: g}
}

type guarded[T watcher.Object] struct {
	lw watcher.ListerWatcher[T]
	g  Switch
}

func (l guarded[T]) List(ctx context.Context, opts metav1.ListOptions) (watcher.ListPage[T], error) {
	page, err := l.lw.List(ctx, opts)
	if apierrors.IsNotFound(err) {
		return watcher.ListPage[T]{}, l.notServed(ctx)
	}
	return page, err
}

func (l guarded[T]) Watch(ctx context.Context, opts metav1.ListOptions) (apiwatch.Interface, error) {
	w, err := l.lw.Watch(ctx, opts)
	if apierrors.IsNotFound(err) {
		return nil, l.notServed(ctx)
	}
	return w, err
}

func (l guarded[T]) notServed(ctx context.Context) error {
	l.g.Shut("not served")
	<-ctx.Done()
	return ctx.Err()
}

// Source is what Gated wraps and returns: informer.Source.
type Source[T watcher.Object] interface {
	Run(ctx context.Context, emit func(watcher.Event[T])) error
	LastError() error
}

// Gated returns src run only while g is open (see the package
// documentation). The result also reports the gate in LastError and
// Status, and passes on src's Status and ListMeta.
func Gated[T watcher.Object](src Source[T], g Switch) Source[T] {
	return &gated[T]{src: src, g: g}
}

type gated[T watcher.Object] struct {
	src Source[T]
	g   Switch
}

// Run runs src while the gate is open, and stands in for it while the gate
// is shut, until ctx is done.
func (s *gated[T]) Run(ctx context.Context, emit func(watcher.Event[T])) error {
	emptied := false
	for ctx.Err() == nil {
		open, changed := s.g.State()
		if !open {
			if !emptied {
				// Not served: the kind has no objects. An empty
				// snapshot says so to the cache and its handlers, and
				// lets the informer count as synced.
				emit(watcher.Event[T]{Type: watcher.RelistStart})
				emit(watcher.Event[T]{Type: watcher.RelistDone})
				emptied = true
			}
			select {
			case <-ctx.Done():
				return nil
			case <-changed:
			}
			continue
		}
		emptied = false
		if err := s.runOpen(ctx, changed, emit); err != nil {
			return err
		}
	}
	return nil
}

// runOpen runs src until the gate changes or ctx is done.
func (s *gated[T]) runOpen(ctx context.Context, changed <-chan struct{}, emit func(watcher.Event[T])) error {
	srcCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() {
		select {
		case <-changed:
			cancel()
		case <-srcCtx.Done():
		}
	})
	err := s.src.Run(srcCtx, emit)
	cancel()
	wg.Wait()
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// LastError is the gate's WaitingError while it is shut, else src's.
func (s *gated[T]) LastError() error {
	if err := s.g.Err(); err != nil {
		return err
	}
	return s.src.LastError()
}

// Status is src's status (when it has one), with the gate's WaitingError
// as its error and PhaseWaiting as its phase while the gate is shut.
func (s *gated[T]) Status() watcher.Status {
	var st watcher.Status
	if src, ok := s.src.(interface{ Status() watcher.Status }); ok {
		st = src.Status()
	} else {
		st.LastError = s.src.LastError()
	}
	if err := s.g.Err(); err != nil {
		st.Phase, st.LastError = watcher.PhaseWaiting, err
	}
	return st
}

// ListMeta is src's, when it has one.
func (s *gated[T]) ListMeta() metav1.ListMeta {
	if src, ok := s.src.(interface{ ListMeta() metav1.ListMeta }); ok {
		return src.ListMeta()
	}
	return metav1.ListMeta{}
}
