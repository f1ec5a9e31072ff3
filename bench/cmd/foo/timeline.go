package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// The phases of one Foo, in order, as the parent sees them: its create
// returned; its Deployment appeared (the controller created it); the
// Deployment was available (kube-controller-manager and podsim made its
// pod ready); the Foo's status said so (the controller wrote it).
const (
	phaseCreated = iota
	phaseDeployment
	phaseAvailable
	phaseConverged
	phases
)

var phaseNames = [phases]string{"Foo created", "Deployment created", "Deployment available", "Foo status available"}

// timeline holds when each Foo reached each phase.
type timeline struct {
	mu sync.Mutex
	at [][phases]time.Time // by Foo index
}

func newTimeline(n int) *timeline { return &timeline{at: make([][phases]time.Time, n)} }

// mark records phase for the Foo or Deployment name (foo-00042 or
// dep-00042), the first time only.
func (t *timeline) mark(name string, phase int) {
	i := strings.LastIndexByte(name, '-')
	n, err := strconv.Atoi(name[i+1:])
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if err != nil || n < 0 || n >= len(t.at) || !t.at[n][phase].IsZero() {
		return
	}
	t.at[n][phase] = now
}

// summary says how long each step took (median, 90th percentile and the
// longest over the Foos) and when the last Foo reached each phase,
// counted from first.
func (t *timeline) summary(first time.Time) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var b strings.Builder
	b.WriteString("steps (s, p50/p90/max):")
	for p := 1; p < phases; p++ {
		var d []float64
		for _, at := range t.at {
			if !at[p].IsZero() && !at[p-1].IsZero() {
				d = append(d, at[p].Sub(at[p-1]).Seconds())
			}
		}
		if len(d) == 0 {
			continue
		}
		slices.Sort(d)
		fmt.Fprintf(&b, " %s→%s %.2f/%.2f/%.2f;", phaseNames[p-1], strings.TrimPrefix(phaseNames[p], "Deployment "), d[len(d)/2], d[len(d)*9/10], d[len(d)-1])
	}
	b.WriteString(" last at (s):")
	for p := range phases {
		var last time.Time
		for _, at := range t.at {
			if at[p].After(last) {
				last = at[p]
			}
		}
		if !last.IsZero() {
			fmt.Fprintf(&b, " %s %.2f;", phaseNames[p], last.Sub(first).Seconds())
		}
	}
	return strings.TrimSuffix(b.String(), ";")
}

// watchDeployments marks the Deployments of ns in tl as they appear and
// become available, until ctx is done.
func watchDeployments(ctx context.Context, kc kubernetes.Interface, ns string, tl *timeline) error {
	rv := ""
	for {
		w, err := kc.AppsV1().Deployments(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		for ev := range w.ResultChan() {
			d, ok := ev.Object.(*appsv1.Deployment)
			if !ok {
				continue
			}
			rv = d.ResourceVersion
			tl.mark(d.Name, phaseDeployment)
			if d.Status.ObservedGeneration >= d.Generation && d.Status.AvailableReplicas >= ptr.Deref(d.Spec.Replicas, 1) {
				tl.mark(d.Name, phaseAvailable)
			}
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}
