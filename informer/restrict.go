package informer

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kloop-dev/kloop/internal/restrict"
	"github.com/kloop-dev/kloop/watcher"
)

// restricted is an informer as a restriction's Attach gets it.
type restricted[T watcher.Object] struct{ inf *Informer[T] }

var _ restrict.Informer = restricted[watcher.Object]{}

func (r restricted[T]) Name() string              { return r.inf.name }
func (r restricted[T]) Len() int                  { return r.inf.store.Len() }
func (r restricted[T]) Refilter() int             { return r.inf.refilter() }
func (r restricted[T]) Relist() <-chan struct{}   { return r.inf.relist() }
func (r restricted[T]) ListMeta() metav1.ListMeta { return r.inf.listMeta() }
