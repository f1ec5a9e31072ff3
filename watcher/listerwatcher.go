package watcher

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiwatch "k8s.io/apimachinery/pkg/watch"
)

// ListerWatcher is the narrow view of one API resource (in one namespace or
// all, under optional selectors) that a Reflector needs: LIST a page and open
// a WATCH.
//
// Ownership and concurrency:
//   - The reflector calls one method at a time, from one goroutine.
//   - opts is the reflector's request: resourceVersion, limit, continue,
//     watch parameters. The ListerWatcher adds its own scope (namespace,
//     label and field selectors) and must not keep opts.
//   - List returns a page the caller owns. Items must be distinct pointers
//     that the ListerWatcher neither keeps nor changes later.
//   - Watch returns a stream the caller owns and ends with Stop. Objects in
//     its events belong to the receiver. Error events carry a *metav1.Status
//     (or its unstructured form), as the API server sends them.
//   - Both honour ctx: when it is done they return promptly, and a watch
//     opened with it ends.
//   - Errors are returned as the client produced them (an *apierrors.StatusError
//     for API errors), so that the reflector can tell 410 Gone from 403.
type ListerWatcher[T Object] interface {
	List(ctx context.Context, opts metav1.ListOptions) (ListPage[T], error)
	Watch(ctx context.Context, opts metav1.ListOptions) (apiwatch.Interface, error)
}

// ListPage is one page of a LIST response.
type ListPage[T Object] struct {
	// Items of this page, in server order.
	Items []T
	// ResourceVersion of the list (the snapshot the pages belong to).
	ResourceVersion string
	// Continue is the token for the next page; empty on the last page.
	Continue string
	// ListMeta is the list's metadata as the server sent it (ResourceVersion
	// and Continue above repeat two of its fields), for what the reflector
	// does not read itself, such as shardInfo (see Reflector.ListMeta).
	// Optional: a ListerWatcher that has none leaves it zero.
	ListMeta metav1.ListMeta
}

// Scope limits a ListerWatcher to a namespace and selectors. The zero value means every object in every
// namespace (or every object of a cluster-scoped resource).
type Scope struct {
	// Namespace limits the objects to one namespace. Empty means all
	// namespaces. Must stay empty for cluster-scoped resources.
	Namespace string
	// LabelSelector and FieldSelector use the API server's syntax, for example
	// "app=web,tier!=cache" and "metadata.name=foo" (see
	// k8s.io/apimachinery/pkg/labels and .../fields to build them).
	LabelSelector string
	FieldSelector string
	// Decoding is what FromResource's protobuf decoder may leave out or
	// share; other ListerWatchers ignore it. The zero value decodes whole,
	// unshared objects. An informer sets it as informer.Memory chooses.
	Decoding Decoding
}

// Decoding says what a decoder may leave out of the objects it decodes or
// share between them. Only a reader that never modifies the objects (an
// informer's read-only cache) should ask for shared labels.
type Decoding struct {
	// DropManagedFields skips metadata.managedFields.
	DropManagedFields bool
	// ShareLabels gives objects with identical labels one shared map.
	ShareLabels bool
}

// apply writes the selectors into a request's options.
func (o Scope) apply(opts *metav1.ListOptions) {
	opts.LabelSelector = o.LabelSelector
	opts.FieldSelector = o.FieldSelector
}
