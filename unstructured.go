package kloop

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kloop-dev/kloop/informer"
)

// Unstructured returns the App's shared informer for the resource gvr,
// with its objects as *unstructured.Unstructured: for kinds known only at
// run time (named in a config file) or whose Go types the program does not
// have (another project's CRD). The scheme need not know the kind and no
// discovery request is made, so gvr must name the resource; it is taken to
// be namespaced unless ObjectsOptions.ClusterScoped is set, and a
// namespaced one is watched in Options.Namespace unless
// ObjectsOptions.Namespace names another. The selectors of ObjectsOptions
// narrow it; its Resource is not needed and is ignored.
//
// The informer is the App's factory's, started by Run (at once if Run is
// already running). It offers reads of the cache (Lister) and handlers
// (AddHandler). For writes, and reads that wait for them, take a Handle
// instead: Objects[*unstructured.Unstructured](app,
// ObjectsOptions{Kind: gvk}), whose resource and scope discovery finds.
// Its objects are the cache's: never modify them. Unstructured informers are not sharded (Options.Sharding).
//
// An error (an empty resource name, a stopped App) is recorded in the App,
// so Run returns it too, and returned.
func Unstructured(app *App, gvr schema.GroupVersionResource, opts ...ObjectsOptions) (*informer.Informer[*unstructured.Unstructured], error) {
	cfg, err := objectsOptions(opts)
	scope := cfg.scope()
	if !cfg.ClusterScoped {
		scope.Namespace = cfg.namespaceOr(app.watchNS)
	}
	var inf *informer.Informer[*unstructured.Unstructured]
	switch {
	case err != nil:
	case gvr.Resource == "" || gvr.Version == "":
		err = errors.New("name the resource and its version, for example {Group: \"example.com\", Version: \"v1\", Resource: \"widgets\"}")
	default:
		inf, err = informer.OfResource[*unstructured.Unstructured](app.Factory(), gvr, scope)
	}
	if err != nil {
		err = fmt.Errorf("kloop.Unstructured %s: %w", gvr, err)
		app.fail(err)
		return nil, err
	}
	return inf, nil
}
