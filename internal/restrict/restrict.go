// Package restrict is the seam between the informer factory and what
// narrows its informers while they run: the sharding package, which gives
// each replica its share of the objects. The factory calls
// informer.FactoryOptions.Restrict for each informer it creates; a
// Restriction it returns narrows that informer, and Attach hands over the
// informer so that whoever moves the restriction can tell it.
package restrict

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kloop-dev/kloop/watcher"
)

// Restriction narrows one informer of a factory to a part of its objects
// that may change while it runs: a parameter on its requests, so that the
// API server sends only that part, and the same choice made on the
// client, for a server that does not.
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
	Attach func(Informer)
}

// Informer is what moving a Restriction needs of an informer.
type Informer interface {
	// Name is the informer's name (informer.Options.Name).
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
