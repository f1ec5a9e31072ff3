package informer

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kloop-dev/kloop/watcher"
)

// Restriction narrows one informer of a Factory (see
// FactoryOptions.Restrict) to a part of its objects that may change while
// it runs: a parameter on its requests, so that the API server sends only
// that part, and the same choice made on the client, for a server that
// does not. The sharding package's Member.Shard makes them.
type Restriction struct {
	// ListOptions, if set, adds to the options of every LIST and WATCH
	// (see watcher.Options.ListOptions). Optional.
	ListOptions func(*metav1.ListOptions)
	// Keep is the choice made on the client: the informer's Filter. It must
	// hold for every object the server may send under ListOptions, since a
	// server that does not know a parameter ignores it. Required.
	Keep func(watcher.Object) bool
	// Attach, if set, is called with the informer once it exists, so that
	// whoever moves the restriction can tell it: Refilter after Keep
	// rejects more, Relist after it accepts more.
	Attach func(Restricted)
}

// Restricted is what moving a Restriction needs of the informer it
// narrows.
type Restricted interface {
	// Name is the informer's name (Options.Name).
	Name() string
	// Len is the number of cached objects.
	Len() int
	// Refilter drops from the cache every object Keep now rejects and
	// returns how many it dropped; handlers are not told.
	Refilter() int
	// Relist takes a new snapshot from the API server; the channel is
	// closed once one taken after the call is in the cache.
	Relist() <-chan struct{}
	// ListMeta is the metadata of the latest LIST page, which says what
	// the server made of ListOptions.
	ListMeta() metav1.ListMeta
}

// restricted is an informer as a restriction's Attach gets it.
type restricted[T watcher.Object] struct{ inf *Informer[T] }

var _ Restricted = restricted[watcher.Object]{}

func (r restricted[T]) Name() string              { return r.inf.name }
func (r restricted[T]) Len() int                  { return r.inf.store.Len() }
func (r restricted[T]) Refilter() int             { return r.inf.refilter() }
func (r restricted[T]) Relist() <-chan struct{}   { return r.inf.relist() }
func (r restricted[T]) ListMeta() metav1.ListMeta { return r.inf.listMeta() }

// KindGate holds an informer of a Factory while its kind is not served
// (see FactoryOptions.WaitFor): the informer has an empty, synced cache and
// neither lists nor watches while the gate is shut. A 404 from the API
// server shuts it. Package kloop makes them for Options.WaitForKinds.
type KindGate interface {
	// State reports whether the gate is open, and a channel that is
	// closed at its next change.
	State() (open bool, changed <-chan struct{})
	// Shut shuts the gate for reason; it reports whether that changed it.
	Shut(reason string) bool
	// Err is nil while the gate is open, and says which kind waits and why
	// while it is shut.
	Err() error
}
