package crcache_test

import (
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"

	kloopcache "github.com/kloop-dev/kloop/crcache"
	"github.com/kloop-dev/kloop/informer"
)

// A controller-runtime manager on kloop's cache: one line in its options.
// (Not run: it needs a cluster.)
func ExampleNewCache() {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Scheme:   scheme,
		NewCache: kloopcache.NewCache,
	})
	if err != nil {
		panic(err)
	}
	_ = mgr // add controllers, then mgr.Start(ctrl.SetupSignalHandler())
}

// kloop's memory settings, here the encoded cache for the built-in kinds.
func ExampleNewCacheWith() {
	_ = ctrl.Options{
		NewCache: kloopcache.NewCacheWith(kloopcache.Options{Memory: informer.Memory{Encoded: true}}),
	}
}
