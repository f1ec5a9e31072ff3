package informer

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kloop-dev/kloop/watcher"
)

// Restriction narrows one informer of a factory to a part of its objects
// that may change while it runs: a parameter on its requests, so that the
// API server sends only that part, and the same choice made on the
// client, for a server that does not. The sharding package builds them
// (one replica's share of the objects); see FactoryOptions.Restrict.
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

// Restricted is what moving a Restriction needs of an informer; every
// *Informer[T] is one.
type Restricted interface {
	Name() string
	// Len is the number of cached objects.
	Len() int
	Refilter() int
	Relist() <-chan struct{}
	// ListMeta is the metadata of the Source's latest LIST page, which
	// says what the server made of ListOptions.
	ListMeta() metav1.ListMeta
}

var _ Restricted = (*Informer[watcher.Object])(nil)
