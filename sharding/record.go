package sharding

import (
	"fmt"
	"strconv"
	"time"

	"github.com/kloop-dev/kloop/internal/slots"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The label and annotations a member's Lease carries, next to the usual
// holderIdentity, leaseDurationSeconds and renewTime.
const (
	// GroupLabel holds the group name; members find each other by it.
	GroupLabel = "sharding.kloop.dev/group"
	// SlotsAnnotation is the group's number of slots, as this member has it.
	SlotsAnnotation = "sharding.kloop.dev/slots"
	// KeyAnnotation is the shard key: "namespace" or "uid".
	KeyAnnotation = "sharding.kloop.dev/key"
	// HeldAnnotation lists the slots the member may be working on (comma-separated
	// runs, such as "0-3,9"): no other member starts them while the Lease
	// is live.
	HeldAnnotation = "sharding.kloop.dev/held"
	// DrainingAnnotation lists the held slots the member is giving up.
	DrainingAnnotation = "sharding.kloop.dev/draining"
)

// leaseName is the name of member id's Lease in group.
func leaseName(group, id string) string { return group + "-" + id }

// recordOf reads a member's Lease. It fails for a Lease that is not a
// member's (no holder, or annotations it cannot read).
func recordOf(l *coordinationv1.Lease) (record, error) {
	var r record
	if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
		return r, fmt.Errorf("lease %s has no holderIdentity", l.Name)
	}
	r.Identity = *l.Spec.HolderIdentity
	r.RV = l.ResourceVersion
	r.Name = l.Name
	if l.Spec.LeaseDurationSeconds != nil {
		r.Duration = time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
	}
	a := l.Annotations
	n, err := strconv.Atoi(a[SlotsAnnotation])
	if err != nil || n <= 0 {
		return r, fmt.Errorf("lease %s: annotation %s=%q is not a slot count", l.Name, SlotsAnnotation, a[SlotsAnnotation])
	}
	r.Slots = n
	k, ok := parseKey(a[KeyAnnotation])
	if !ok {
		return r, fmt.Errorf("lease %s: annotation %s=%q is not a shard key", l.Name, KeyAnnotation, a[KeyAnnotation])
	}
	r.Key = k
	if r.Held, err = slots.Parse(a[HeldAnnotation], n); err != nil {
		return r, fmt.Errorf("lease %s: %w", l.Name, err)
	}
	if r.Draining, err = slots.Parse(a[DrainingAnnotation], n); err != nil {
		return r, fmt.Errorf("lease %s: %w", l.Name, err)
	}
	return r, nil
}

// writeRecord sets l's spec and annotations to say what r says, renewed at
// now. It keeps l's other labels and annotations.
func writeRecord(l *coordinationv1.Lease, group string, r record, now time.Time) {
	if l.Labels == nil {
		l.Labels = map[string]string{}
	}
	l.Labels[GroupLabel] = group
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	l.Annotations[SlotsAnnotation] = strconv.Itoa(r.Slots)
	l.Annotations[KeyAnnotation] = r.Key.String()
	l.Annotations[HeldAnnotation] = r.Held.String()
	l.Annotations[DrainingAnnotation] = r.Draining.String()
	id := r.Identity
	secs := int32((r.Duration + time.Second - 1) / time.Second)
	t := metav1.NewMicroTime(now)
	l.Spec.HolderIdentity = &id
	l.Spec.LeaseDurationSeconds = &secs
	l.Spec.RenewTime = &t
	if l.Spec.AcquireTime == nil {
		l.Spec.AcquireTime = &t
	}
}
