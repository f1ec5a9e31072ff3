// Package lease is the Lease mechanism that leader election and sharding
// share: one client for Leases, one way to keep a Lease of one's own
// written (Held), one timing triple declared, defaulted and validated
// (Timing), and one renew mechanism (Renewal: when the next write is due,
// how long it may take, when the Lease is lost). What a Lease means (the
// leader's record, a shard member's slots) and when it is written besides
// its renewals are each user's own.
package lease

import (
	"context"
	"fmt"
	"log/slog"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/kloop-dev/kloop/client"
)

// Client is the calls on Leases that a Held makes. Objects
// passed in are not kept; objects returned are the caller's.
// *client.Resource[*coordinationv1.Lease] is one (see NewClient).
type Client interface {
	Get(ctx context.Context, namespace, name string) (*coordinationv1.Lease, error)
	Create(ctx context.Context, l *coordinationv1.Lease) (*coordinationv1.Lease, error)
	Update(ctx context.Context, l *coordinationv1.Lease) (*coordinationv1.Lease, error)
}

var _ Client = (*client.Resource[*coordinationv1.Lease])(nil)

// NewClient returns the client for Leases that an Elector and a shard
// group member use: kloop's client, writing as fieldManager, with write
// tracking off (nothing reads Leases through a CachedReader).
func NewClient(restCfg *rest.Config, fieldManager string, logger *slog.Logger) (*client.Resource[*coordinationv1.Lease], error) {
	c, err := client.New(restCfg, client.Options{FieldManager: fieldManager, DisableWriteTracking: true, Logger: logger})
	if err != nil {
		return nil, err
	}
	return client.NewResource[*coordinationv1.Lease](c, coordinationv1.SchemeGroupVersion.WithResource("leases"))
}

// Held is one Lease that this process writes: it remembers the Lease
// as last read or written, so that every write carries that
// resourceVersion as a precondition and succeeds only if nobody else wrote
// it since (a conflict error otherwise). It is not safe for concurrent
// use: one loop owns it.
type Held struct {
	leases          Client
	namespace, name string
	cur             *coordinationv1.Lease // nil: absent, or not known
}

// NewHeld returns the Held of namespace/name. It does no I/O.
func NewHeld(leases Client, namespace, name string) *Held {
	return &Held{leases: leases, namespace: namespace, name: name}
}

// Current is the Lease as last read or written, nil when it was absent or
// is not known. It is read-only.
func (h *Held) Current() *coordinationv1.Lease { return h.cur }

// Forget drops the Lease as last seen: the next Write reads it first.
func (h *Held) Forget() { h.cur = nil }

// Read reads the Lease afresh. It returns nil and no error when the Lease
// does not exist; on another error, what was last seen is kept.
func (h *Held) Read(ctx context.Context) (*coordinationv1.Lease, error) {
	l, err := h.leases.Get(ctx, h.namespace, h.name)
	switch {
	case apierrors.IsNotFound(err):
		h.cur = nil
		return nil, nil
	case err != nil:
		return nil, err
	}
	h.cur = l
	return l, nil
}

// Write creates the Lease, when it was last seen absent, or updates the
// Lease as last seen, with set applied to a copy; set must leave metadata
// other than labels and annotations alone. The Lease the server stored is
// returned and remembered; on an error what was last seen is kept (a
// conflict means it changed: Read it).
func (h *Held) Write(ctx context.Context, set func(*coordinationv1.Lease)) (*coordinationv1.Lease, error) {
	var (
		out *coordinationv1.Lease
		err error
	)
	if h.cur == nil {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: h.namespace, Name: h.name}}
		set(l)
		out, err = h.leases.Create(ctx, l)
	} else {
		l := h.cur.DeepCopy()
		set(l)
		out, err = h.leases.Update(ctx, l)
	}
	if err != nil {
		return nil, err
	}
	h.cur = out
	return out, nil
}

// ReadAndWrite is Write after a Read, when the Lease is not known.
func (h *Held) ReadAndWrite(ctx context.Context, set func(*coordinationv1.Lease)) (*coordinationv1.Lease, error) {
	if h.cur == nil {
		if _, err := h.Read(ctx); err != nil {
			return nil, err
		}
	}
	return h.Write(ctx, set)
}

// Preconditions are the delete options that remove the Lease only as last
// seen; without a Lease seen they remove whatever is there.
func (h *Held) Preconditions() metav1.DeleteOptions {
	var opts metav1.DeleteOptions
	if h.cur != nil {
		rv := h.cur.ResourceVersion
		opts.Preconditions = &metav1.Preconditions{ResourceVersion: &rv}
	}
	return opts
}

// String names the Lease.
func (h *Held) String() string { return fmt.Sprintf("lease %s/%s", h.namespace, h.name) }
