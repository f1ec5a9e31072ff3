package informer

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kloop-dev/kloop/watcher"
)

// Sharder restricts some of a factory's informers to a shard of their
// objects: the part this replica of a program handles (the sharding
// package provides one). See FactoryOptions.Sharder.
type Sharder interface {
	// Shard is called once for each informer the factory creates, with its
	// resource (such as "deployments.v1.apps") and Scope. It returns nil to
	// leave the informer whole.
	Shard(resource string, scope Scope) *Shard
}

// SharderFunc is a function that is a Sharder.
type SharderFunc func(resource string, scope Scope) *Shard

// Shard implements Sharder.
func (f SharderFunc) Shard(resource string, scope Scope) *Shard { return f(resource, scope) }

// Shard is one informer's part of its objects, which may change while it
// runs.
type Shard struct {
	// Selector returns the shard selector sent with every LIST and WATCH
	// (see watcher.Config.ShardSelector); "" sends none. Optional.
	Selector func() string
	// Keep is the same choice made on the client: the informer's Filter.
	// It must hold for every object the selector matches, since a server
	// without sharded list and watch ignores the selector. Required.
	Keep func(watcher.Object) bool
	// Attach, if set, is called with the informer once it exists, so that
	// whoever moves the shard can tell it: Refilter after Keep rejects
	// more, Relist after it accepts more.
	Attach func(Resharder)
}

// Resharder is what moving a shard needs of an informer; every
// *Informer[T] is one.
type Resharder interface {
	Name() string
	// Len is the number of cached objects.
	Len() int
	Refilter() int
	Relist() <-chan struct{}
	// ShardInfo says whether the server applied the selector (for the
	// built-in kinds; lists of custom resources carry no ShardInfo).
	ShardInfo() *metav1.ShardInfo
}

var _ Resharder = (*Informer[watcher.Object])(nil)
