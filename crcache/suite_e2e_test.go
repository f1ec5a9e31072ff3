package crcache_test

// The cases of controller-runtime's pkg/cache suite (v0.25.2,
// cache_test.go) that exercise the cache.Cache interface, rewritten for
// kloop's cache on kloop's control plane (this file and
// suite_more_e2e_test.go). Each test names what it ports; where it
// differs, a comment says how and why.
//
// Ported: the 58 cases of CacheTest (reader and informer, for typed,
// unstructured and metadata-only objects, each run under the suite's three
// configurations: plain, multi-namespace, no deep copy), the 29 entries
// of its selectors table, the 4 of ReaderFailOnMissingInformer, the
// non-blocking GetInformer, the 6 of "Cache with transformers", the 2 of
// "Cache with selectors" and TestIndexFieldDoesNotBlock. Not ported:
// TransformStripManagedFields (2 cases of a controller-runtime helper
// function, not of the cache) and TestReaderWaitsForCacheSync (it needs
// Options.NewInformer and a fake informer, an option this cache refuses;
// its point, a read before the sync is a Timeout, is the cancelled-context
// case).
//
// Differences, each with its reason:
//   - Namespaces, nodes and pods have names of their own per test, and
//     counts are of the test's own namespaces: the control plane is shared
//     by the package's tests (testenv.Shared) rather than one per suite.
//   - The deep-copy case compares the read with the created pod without
//     managedFields: kloop does not cache them.
//   - The two "should be able to change object in informer cache" cases
//     (UnsafeDisableDeepCopy) are turned round: kloop's cached objects are
//     read-only (its mutation detector fails a test that writes to one),
//     so the port checks that such reads are the cache's own object.
//   - The cancelled-context read runs on a cache of its own, started and
//     synced as the suite's BeforeEach does, so that its informer is new.
//   - Cases the suite waits on with Eventually wait on informer events
//     here (a handler's channel, await.Until), never on a timer.
//   - The selectors table also checks what a handler hears up to its sync.

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kloopcache "github.com/kloop-dev/kloop/crcache"
	"github.com/kloop-dev/kloop/testenv/await"
)

// suiteConfigs are the three configurations controller-runtime runs its
// CacheTest under: the plain cache, a multi-namespace cache (namespace one
// through the all-namespaces entry's field selector, namespace two and
// "default" by name; namespace three left out) and one that never deep
// copies.
func suiteConfigs(f *fixture) map[string]cache.Options {
	yes := true
	return map[string]cache.Options{
		"plain": {},
		"multi-namespace": {DefaultNamespaces: map[string]cache.Config{
			cache.AllNamespaces: {FieldSelector: fields.OneTermEqualSelector("metadata.namespace", f.ns1)},
			f.ns2:               {},
			"default":           {},
		}},
		"no-deep-copy": {DefaultUnsafeDisableDeepCopy: &yes},
	}
}

func TestSuite_Reader(t *testing.T) {
	f := newFixture(t)
	for name, opts := range suiteConfigs(f) {
		t.Run(name, func(t *testing.T) {
			multi := opts.DefaultNamespaces != nil
			noCopy := opts.DefaultUnsafeDisableDeepCopy != nil
			visible := 6 // the fixture's pods this configuration caches
			if multi {
				visible = 5 // not test-pod-4, in namespace three
			}
			c := startCache(t, f.cfg, opts)
			ctx := t.Context()

			for _, class := range []string{"structured", "unstructured", "metadata"} {
				t.Run(class, func(t *testing.T) {
					podList := newList(class, "Pod")
					svcList := newList(class, "Service")
					t.Run("lists objects not watched before", func(t *testing.T) {
						if err := c.List(ctx, svcList); err != nil {
							t.Fatal(err)
						}
						if !slices.ContainsFunc(items(svcList), isKubeService) {
							t.Errorf("services %v lack default/kubernetes", names(items(svcList)))
						}
					})
					t.Run("gets objects not watched before", func(t *testing.T) {
						svc := newObject(class, "Service")
						if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "kubernetes"}, svc); err != nil {
							t.Fatal(err)
						}
						if svc.GetName() != "kubernetes" || svc.GetNamespace() != "default" {
							t.Errorf("got %s/%s", svc.GetNamespace(), svc.GetName())
						}
					})
					t.Run("filters by labels in one namespace", func(t *testing.T) {
						if err := c.List(ctx, podList, client.InNamespace(f.ns2), client.MatchingLabels{"test-label": "test-pod-2"}); err != nil {
							t.Fatal(err)
						}
						got := items(podList)
						if len(got) != 1 || got[0].GetLabels()["test-label"] != "test-pod-2" {
							t.Errorf("got %v, want test-pod-2 alone", names(got))
						}
					})
					t.Run("lists by namespace", func(t *testing.T) {
						if err := c.List(ctx, podList, client.InNamespace(f.ns1)); err != nil {
							t.Fatal(err)
						}
						got := items(podList)
						if len(got) != 2 {
							t.Errorf("got %v in %s, want 2 pods", names(got), f.ns1)
						}
						for _, p := range got {
							if p.GetNamespace() != f.ns1 {
								t.Errorf("%s/%s listed in %s", p.GetNamespace(), p.GetName(), f.ns1)
							}
						}
					})
					t.Run("not found is NotFound", func(t *testing.T) {
						err := c.Get(ctx, client.ObjectKey{Namespace: f.ns1, Name: "unknown"}, newObject(class, "Service"))
						if !apierrors.IsNotFound(err) {
							t.Errorf("got %v, want NotFound", err)
						}
					})
					t.Run("unwatched namespace is an error", func(t *testing.T) {
						if err := c.Get(ctx, client.ObjectKey{Namespace: "unknown", Name: "unknown"}, newObject(class, "Service")); err == nil {
							t.Error("got no error")
						}
					})
					t.Run("pagination is refused", func(t *testing.T) {
						if err := c.List(ctx, podList); err != nil {
							t.Fatal(err)
						}
						if podList.GetContinue() != "continue-not-supported" {
							t.Errorf("continue = %q, want the sentinel", podList.GetContinue())
						}
						err := c.List(ctx, podList, client.Continue(podList.GetContinue()))
						if err == nil || err.Error() != "continue list option is not supported by the cache" {
							t.Errorf("got %v", err)
						}
					})
					t.Run("filters by labels across namespaces", func(t *testing.T) {
						// The suite makes another test-pod-2 in namespace
						// one; so does this port, in a namespace of its
						// own, and waits until the cache has it.
						extra := f.namespace(t, "cr-extra")
						f.pod(t, "test-pod-2", extra, corev1.RestartPolicyAlways, nil)
						want := 2
						if multi {
							want = 1 // the extra namespace is not cached
						} else {
							waitCached(t, c, class, extra, "test-pod-2")
						}
						list := newList(class, "Pod")
						if err := c.List(ctx, list, client.MatchingLabels{"test-label": "test-pod-2"}); err != nil {
							t.Fatal(err)
						}
						got := slices.DeleteFunc(items(list), func(p client.Object) bool { return p.GetNamespace() != extra && p.GetNamespace() != f.ns2 })
						if len(got) != want {
							t.Errorf("got %v labelled test-pod-2, want %d", names(got), want)
						}
					})
					t.Run("a continue token is refused", func(t *testing.T) {
						if err := c.List(ctx, newList(class, "Pod"), client.Continue("token")); err == nil {
							t.Error("got no error")
						}
					})
					if class != "structured" && !noCopy {
						t.Run("deep copies", func(t *testing.T) {
							key := client.ObjectKey{Namespace: f.ns2, Name: "test-pod-2"}
							read := newObject(class, "Pod")
							if err := c.Get(ctx, key, read); err != nil {
								t.Fatal(err)
							}
							changeLabelInPlace(read)
							again := newObject(class, "Pod")
							if err := c.Get(ctx, key, again); err != nil {
								t.Fatal(err)
							}
							if again.GetLabels()["test-label"] != "test-pod-2" {
								t.Errorf("changing a read changed the cache: %v", again.GetLabels())
							}
						})
					}
					if class != "structured" && noCopy {
						t.Run("does not deep copy", func(t *testing.T) {
							key := client.ObjectKey{Namespace: f.ns2, Name: "test-pod-2"}
							a, b := newObject(class, "Pod"), newObject(class, "Pod")
							if err := c.Get(ctx, key, a); err != nil {
								t.Fatal(err)
							}
							if err := c.Get(ctx, key, b); err != nil {
								t.Fatal(err)
							}
							if !shared(a, b) {
								t.Error("two reads have maps of their own: copied")
							}
							l1, l2 := newList(class, "Pod"), newList(class, "Pod")
							if err := c.List(ctx, l1, client.InNamespace(f.ns1)); err != nil {
								t.Fatal(err)
							}
							if err := c.List(ctx, l2, client.InNamespace(f.ns1)); err != nil {
								t.Fatal(err)
							}
							i1, i2 := items(l1), items(l2)
							byName := func(x, y client.Object) int { return strings.Compare(x.GetName(), y.GetName()) }
							slices.SortFunc(i1, byName)
							slices.SortFunc(i2, byName)
							if len(i1) != 2 || len(i2) != 2 {
								t.Fatalf("listed %d and %d pods, want 2", len(i1), len(i2))
							}
							for i := range i1 {
								if !shared(i1[i], i2[i]) {
									t.Errorf("%s: two lists have maps of their own", i1[i].GetName())
								}
							}
						})
					}
					if class == "structured" {
						if !noCopy {
							t.Run("lists with GVK set", func(t *testing.T) {
								var pods corev1.PodList
								if err := c.List(ctx, &pods); err != nil {
									t.Fatal(err)
								}
								if got := f.mine(pods.Items); len(got) != visible {
									t.Errorf("got %d of the fixture's pods, want %d", len(got), visible)
								}
								for _, p := range pods.Items {
									if p.GroupVersionKind() != corev1.SchemeGroupVersion.WithKind("Pod") {
										t.Fatalf("%s has GVK %v", p.Name, p.GroupVersionKind())
									}
								}
							})
							t.Run("deep copies", func(t *testing.T) {
								var out corev1.Pod
								if err := c.Get(ctx, client.ObjectKey{Namespace: f.ns2, Name: "test-pod-2"}, &out); err != nil {
									t.Fatal(err)
								}
								// kloop strips managedFields from what it
								// caches (informer.Memory.KeepManagedFields
								// keeps them): compare without.
								known := f.pods["test-pod-2"].DeepCopy()
								known.ManagedFields = nil
								if !reflect.DeepEqual(&out, known) {
									t.Fatalf("cached pod differs from the created one:\n%+v\n%+v", &out, known)
								}
								*out.Spec.ActiveDeadlineSeconds = 4
								var again corev1.Pod
								if err := c.Get(ctx, client.ObjectKey{Namespace: f.ns2, Name: "test-pod-2"}, &again); err != nil {
									t.Fatal(err)
								}
								if *again.Spec.ActiveDeadlineSeconds != 3 {
									t.Error("changing a read changed the cache")
								}
							})
						} else {
							// The suite checks that two reads share their
							// pointers. So does this port; its other
							// UnsafeDisableDeepCopy case ("should be able to
							// change object in informer cache") is turned
							// round: kloop's cached objects are read-only
							// (the mutation detector fails a test that
							// writes to one).
							t.Run("does not deep copy", func(t *testing.T) {
								key := client.ObjectKey{Namespace: f.ns2, Name: "test-pod-2"}
								var a, b corev1.Pod
								if err := c.Get(ctx, key, &a); err != nil {
									t.Fatal(err)
								}
								if err := c.Get(ctx, key, &b); err != nil {
									t.Fatal(err)
								}
								if reflect.ValueOf(a.Labels).Pointer() != reflect.ValueOf(b.Labels).Pointer() {
									t.Error("two reads have labels of their own: copied")
								}
								var l1, l2 corev1.PodList
								if err := c.List(ctx, &l1, client.InNamespace(f.ns1)); err != nil {
									t.Fatal(err)
								}
								if err := c.List(ctx, &l2, client.InNamespace(f.ns1)); err != nil {
									t.Fatal(err)
								}
								byName := func(x, y corev1.Pod) int { return strings.Compare(x.Name, y.Name) }
								slices.SortFunc(l1.Items, byName)
								slices.SortFunc(l2.Items, byName)
								if len(l1.Items) != 2 || len(l2.Items) != 2 {
									t.Fatalf("listed %d and %d pods, want 2", len(l1.Items), len(l2.Items))
								}
								for i := range l1.Items {
									if reflect.ValueOf(l1.Items[i].Labels).Pointer() != reflect.ValueOf(l2.Items[i].Labels).Pointer() {
										t.Errorf("%s: two lists have labels of their own", l1.Items[i].Name)
									}
								}
							})
						}
						t.Run("a cancelled context is a timeout", func(t *testing.T) {
							// On a cache of its own, whose informers cannot
							// sync: the suite's cache is new for each case, so
							// its pod informer has not synced when the
							// cancelled List comes, unless it is quick.
							fresh := startUnsyncable(t, opts)
							cctx, cancel := context.WithCancel(ctx)
							cancel()
							var pods corev1.PodList
							err := fresh.List(cctx, &pods, client.InNamespace(f.ns1))
							if !apierrors.IsTimeout(err) {
								t.Errorf("got %v, want a timeout", err)
							}
						})
						t.Run("limit", func(t *testing.T) {
							var pods corev1.PodList
							if err := c.List(ctx, &pods, client.Limit(3)); err != nil {
								t.Fatal(err)
							}
							if len(pods.Items) != 3 {
								t.Errorf("got %d pods, want 3", len(pods.Items))
							}
						})
						t.Run("limit with a label", func(t *testing.T) {
							var pods corev1.PodList
							if err := c.List(ctx, &pods, client.MatchingLabels{"common-label": "common"}, client.Limit(1)); err != nil {
								t.Fatal(err)
							}
							if len(pods.Items) != 1 {
								t.Errorf("got %d pods, want 1", len(pods.Items))
							}
						})
					}
				})
			}

			t.Run("cluster-scoped kinds", func(t *testing.T) {
				// "test multinamespaced cache for cluster scoped resources":
				// on a cache of its own over two namespaces, a node is read
				// and listed once (not once per namespace).
				m := startCache(t, f.cfg, cache.Options{DefaultNamespaces: map[string]cache.Config{"default": {}, f.ns1: {}}})
				var node corev1.Node
				if err := m.Get(ctx, client.ObjectKey{Name: f.nodes[0]}, &node); err != nil {
					t.Fatal(err)
				}
				nodes := newList("unstructured", "Node")
				if err := m.List(ctx, nodes); err != nil {
					t.Fatal(err)
				}
				for _, name := range f.nodes {
					n := 0
					for _, o := range items(nodes) {
						if o.GetName() == name {
							n++
						}
					}
					if n != 1 {
						t.Errorf("node %s listed %d times, want once", name, n)
					}
				}
			})
		})
	}
}

func TestSuite_Informer(t *testing.T) {
	f := newFixture(t)
	for name, opts := range suiteConfigs(f) {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			t.Run("starting twice is an error", func(t *testing.T) {
				c := startCache(t, f.cfg, opts)
				if err := c.Start(ctx); err == nil {
					t.Error("second Start returned nil")
				}
			})
			t.Run("informer hears a new object", func(t *testing.T) {
				c := startCache(t, f.cfg, opts)
				inf, err := c.GetInformer(ctx, &corev1.Pod{})
				if err != nil {
					t.Fatal(err)
				}
				if !inf.HasSynced() {
					t.Error("GetInformer returned an informer that has not synced")
				}
				ev := newEvents()
				reg, err := inf.AddEventHandler(ev)
				if err != nil {
					t.Fatal(err)
				}
				await.Closed(t, "the handler to sync", reg.HasSyncedChecker().Done())
				if !reg.HasSynced() {
					t.Error("HasSynced false after HasSyncedChecker closed")
				}
				created := f.pod(t, "informer-obj-"+name, f.ns2, corev1.RestartPolicyAlways, nil)
				got := receive(t, "the new pod", ev.adds, f.ns2, "informer-obj-"+name)
				if got.GetUID() != created.GetUID() {
					t.Errorf("heard %s, created %s", got.GetUID(), created.GetUID())
				}
				// Removed, the handler hears nothing more.
				if err := inf.RemoveEventHandler(reg); err != nil {
					t.Fatal(err)
				}
				if err := inf.RemoveEventHandler(reg); err != nil {
					t.Errorf("second RemoveEventHandler: %v", err)
				}
			})
			t.Run("stop and restart informers", func(t *testing.T) {
				c := startCache(t, f.cfg, opts)
				inf, err := c.GetInformer(ctx, &corev1.Pod{})
				if err != nil {
					t.Fatal(err)
				}
				if err := c.RemoveInformer(ctx, &corev1.Pod{}); err != nil {
					t.Fatal(err)
				}
				await.Closed(t, "the removed informer to stop", stoppedChan(inf))
				again, err := c.GetInformer(ctx, &corev1.Pod{})
				if err != nil {
					t.Fatal(err)
				}
				if again == inf || again.IsStopped() || !again.HasSynced() {
					t.Errorf("after removal: same=%v stopped=%v synced=%v", again == inf, again.IsStopped(), again.HasSynced())
				}
			})
			t.Run("informer by GVK", func(t *testing.T) {
				c := startCache(t, f.cfg, opts)
				inf, err := c.GetInformerForKind(ctx, corev1.SchemeGroupVersion.WithKind("Pod"))
				if err != nil {
					t.Fatal(err)
				}
				ev := newEvents()
				if _, err := inf.AddEventHandler(ev); err != nil {
					t.Fatal(err)
				}
				f.pod(t, "informer-gvk-"+name, f.ns2, corev1.RestartPolicyAlways, nil)
				receive(t, "the new pod", ev.adds, f.ns2, "informer-gvk-"+name)
			})
			t.Run("index a field, list by it", func(t *testing.T) {
				c, err := kloopcache.NewCache(f.cfg, opts)
				if err != nil {
					t.Fatal(err)
				}
				if err := c.IndexField(ctx, &corev1.Pod{}, "spec.restartPolicy", func(o client.Object) []string {
					return []string{string(o.(*corev1.Pod).Spec.RestartPolicy)}
				}); err != nil {
					t.Fatal(err)
				}
				await.Run(t, "cache", c.Start)
				if !c.WaitForCacheSync(ctx) {
					t.Fatal("cache did not sync")
				}
				var pods corev1.PodList
				if err := c.List(ctx, &pods, client.MatchingFields{"spec.restartPolicy": "OnFailure"}); err != nil {
					t.Fatal(err)
				}
				if got := f.mine(pods.Items); len(got) != 1 || got[0].Name != "test-pod-3" {
					t.Errorf("got %v, want test-pod-3", podNames(got))
				}
				// Within one namespace, and with an unindexed field.
				if err := c.List(ctx, &pods, client.InNamespace(f.ns1), client.MatchingFields{"spec.restartPolicy": "Never"}); err != nil {
					t.Fatal(err)
				}
				if len(pods.Items) != 2 {
					t.Errorf("got %v in %s, want two", podNames(pods.Items), f.ns1)
				}
				if err := c.List(ctx, &pods, client.MatchingFields{"spec.nodeName": "x"}); err == nil {
					t.Error("a field with no index listed")
				}
				if err := c.List(ctx, &pods, client.MatchingFieldsSelector{Selector: fields.OneTermNotEqualSelector("spec.restartPolicy", "Never")}); err == nil {
					t.Error("a non-exact field selector listed")
				}
			})
			t.Run("matching fields with several indexes", func(t *testing.T) {
				c, err := kloopcache.NewCache(f.cfg, opts)
				if err != nil {
					t.Fatal(err)
				}
				pod := &corev1.Pod{}
				if err := c.IndexField(ctx, pod, "spec.restartPolicy", func(o client.Object) []string {
					return []string{string(o.(*corev1.Pod).Spec.RestartPolicy)}
				}); err != nil {
					t.Fatal(err)
				}
				if err := c.IndexField(ctx, pod, "metadata.labels.test-label", func(o client.Object) []string {
					return []string{o.GetLabels()["test-label"]}
				}); err != nil {
					t.Fatal(err)
				}
				await.Run(t, "cache", c.Start)
				if !c.WaitForCacheSync(ctx) {
					t.Fatal("cache did not sync")
				}
				var pods corev1.PodList
				if err := c.List(ctx, &pods, client.MatchingFields{"spec.restartPolicy": "Never", "metadata.labels.test-label": "test-pod-5"}); err != nil {
					t.Fatal(err)
				}
				if got := f.mine(pods.Items); len(got) != 1 || got[0].Name != "test-pod-5" {
					t.Errorf("got %v, want test-pod-5", podNames(got))
				}
			})
			t.Run("index values of cluster-scoped objects stay as indexed", func(t *testing.T) {
				c, err := kloopcache.NewCache(f.cfg, opts)
				if err != nil {
					t.Fatal(err)
				}
				if err := c.IndexField(ctx, &corev1.Node{}, "name", func(o client.Object) []string { return []string{o.GetName()} }); err != nil {
					t.Fatal(err)
				}
				await.Run(t, "cache", c.Start)
				if !c.WaitForCacheSync(ctx) {
					t.Fatal("cache did not sync")
				}
				var nodes corev1.NodeList
				if err := c.List(ctx, &nodes, client.MatchingFields{"name": f.nodes[1]}); err != nil {
					t.Fatal(err)
				}
				if len(nodes.Items) != 1 || nodes.Items[0].Name != f.nodes[1] {
					t.Errorf("got %d nodes, want %s", len(nodes.Items), f.nodes[1])
				}
			})
			t.Run("GetInformer can be cancelled", func(t *testing.T) {
				c := startUnsyncable(t, opts)
				cctx, cancel := context.WithCancel(ctx)
				cancel()
				if _, err := c.GetInformer(cctx, &corev1.ReplicationController{}); err == nil {
					t.Error("GetInformer with a cancelled context returned no error")
				}
				if _, err := c.GetInformerForKind(cctx, corev1.SchemeGroupVersion.WithKind("LimitRange")); err == nil {
					t.Error("GetInformerForKind with a cancelled context returned no error")
				}
			})
			t.Run("GetInformer without blocking", func(t *testing.T) {
				// NonBlockingGetTest.
				c := startCache(t, f.cfg, opts)
				cctx, cancel := context.WithCancel(ctx)
				cancel()
				inf, err := c.GetInformer(cctx, &corev1.ConfigMap{}, cache.BlockUntilSynced(false))
				if err != nil || inf == nil {
					t.Errorf("GetInformer(BlockUntilSynced(false)) = %v, %v", inf, err)
				}
			})
			for _, class := range []string{"unstructured", "metadata"} {
				t.Run(class+" informer hears a new object", func(t *testing.T) {
					c := startCache(t, f.cfg, opts)
					inf, err := c.GetInformer(ctx, newObject(class, "Pod"))
					if err != nil {
						t.Fatal(err)
					}
					ev := newEvents()
					if _, err := inf.AddEventHandler(ev); err != nil {
						t.Fatal(err)
					}
					f.pod(t, "informer-"+class+"-"+name, f.ns2, corev1.RestartPolicyAlways, nil)
					got := receive(t, "the new pod", ev.adds, f.ns2, "informer-"+class+"-"+name)
					if reflect.TypeOf(got) != reflect.TypeOf(newObject(class, "Pod")) {
						t.Errorf("heard a %T", got)
					}
				})
				t.Run(class+" stop and restart informers", func(t *testing.T) {
					c := startCache(t, f.cfg, opts)
					inf, err := c.GetInformer(ctx, newObject(class, "Pod"))
					if err != nil {
						t.Fatal(err)
					}
					if err := c.RemoveInformer(ctx, newObject(class, "Pod")); err != nil {
						t.Fatal(err)
					}
					await.Closed(t, "the removed informer to stop", stoppedChan(inf))
					again, err := c.GetInformer(ctx, newObject(class, "Pod"))
					if err != nil {
						t.Fatal(err)
					}
					if again == inf || again.IsStopped() || !again.HasSynced() {
						t.Errorf("after removal: same=%v stopped=%v synced=%v", again == inf, again.IsStopped(), again.HasSynced())
					}
				})
				t.Run(class+" GetInformer can be cancelled", func(t *testing.T) {
					c := startUnsyncable(t, opts)
					cctx, cancel := context.WithCancel(ctx)
					cancel()
					if _, err := c.GetInformer(cctx, newObject(class, "Pod")); err == nil {
						t.Error("GetInformer with a cancelled context returned no error")
					}
				})
				t.Run(class+" index a field, list by it", func(t *testing.T) {
					c, err := kloopcache.NewCache(f.cfg, opts)
					if err != nil {
						t.Fatal(err)
					}
					if err := c.IndexField(ctx, newObject(class, "Pod"), "metadata.labels.test-label", func(o client.Object) []string {
						return []string{o.GetLabels()["test-label"]}
					}); err != nil {
						t.Fatal(err)
					}
					await.Run(t, "cache", c.Start)
					if !c.WaitForCacheSync(ctx) {
						t.Fatal("cache did not sync")
					}
					list := newList(class, "Pod")
					if err := c.List(ctx, list, client.InNamespace(f.ns2), client.MatchingFields{"metadata.labels.test-label": "test-pod-3"}); err != nil {
						t.Fatal(err)
					}
					if got := items(list); len(got) != 1 || got[0].GetName() != "test-pod-3" {
						t.Errorf("got %v, want test-pod-3", names(got))
					}
				})
			}
		})
	}
}

// TestSuite_ReaderFailOnMissingInformer ports CacheTestReaderFailOnMissingInformer.
func TestSuite_ReaderFailOnMissingInformer(t *testing.T) {
	f := newFixture(t)
	c := startCache(t, f.cfg, cache.Options{ReaderFailOnMissingInformer: true})
	ctx := t.Context()
	var notCached *cache.ErrResourceNotCached
	if err := c.List(ctx, &corev1.PodList{}); !errors.As(err, &notCached) {
		t.Errorf("List before GetInformer: %v, want ErrResourceNotCached", err)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: f.ns1, Name: "test-pod-1"}, &corev1.Pod{}); !errors.As(err, &notCached) {
		t.Errorf("Get before GetInformer: %v, want ErrResourceNotCached", err)
	}
	if _, err := c.GetInformer(ctx, &corev1.Pod{}); err != nil {
		t.Fatal(err)
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(f.ns1)); err != nil || len(pods.Items) != 2 {
		t.Errorf("List after GetInformer: %d pods, %v; want 2", len(pods.Items), err)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: f.ns1, Name: "test-pod-1"}, &corev1.Pod{}); err != nil {
		t.Errorf("Get after GetInformer: %v", err)
	}
}

// TestSuite_Transformers ports "Cache with transformers": a transform set
// for one kind (ByObject) and a default one, for each class of object.
func TestSuite_Transformers(t *testing.T) {
	f := newFixture(t)
	mark := func(value string) func(any) (any, error) {
		return func(in any) (any, error) {
			o := in.(client.Object)
			a := map[string]string{}
			for k, v := range o.GetAnnotations() {
				a[k] = v
			}
			a["transformed"] = value
			o.SetAnnotations(a)
			return o, nil
		}
	}
	for _, class := range []string{"structured", "unstructured", "metadata"} {
		t.Run(class, func(t *testing.T) {
			c := startCache(t, f.cfg, cache.Options{
				DefaultTransform: mark("default"),
				ByObject:         map[client.Object]cache.ByObject{newObject(class, "Pod"): {Transform: mark("pod")}},
			})
			pod := newObject(class, "Pod")
			if err := c.Get(t.Context(), client.ObjectKey{Namespace: f.ns1, Name: "test-pod-1"}, pod); err != nil {
				t.Fatal(err)
			}
			if got := pod.GetAnnotations()["transformed"]; got != "pod" {
				t.Errorf("pod transformed by %q, want the ByObject transform", got)
			}
			svc := newObject(class, "Service")
			if err := c.Get(t.Context(), client.ObjectKey{Namespace: "default", Name: "kubernetes"}, svc); err != nil {
				t.Fatal(err)
			}
			if got := svc.GetAnnotations()["transformed"]; got != "default" {
				t.Errorf("service transformed by %q, want the default transform", got)
			}
		})
	}
}

// TestSuite_Selectors ports the 30 entries of the "cache with selectors"
// table: which of the fixture's pods a cache configured so holds, listed
// and read as typed, unstructured and metadata-only objects; this port
// also counts what a handler hears up to its sync. Field selectors by name
// alone match the pods of other tests' namespaces too, on the shared
// control plane: only the fixture's namespaces are counted.
func TestSuite_Selectors(t *testing.T) {
	f := newFixture(t)
	pod := &corev1.Pod{}
	all := []string{"test-pod-1", "test-pod-2", "test-pod-3", "test-pod-4", "test-pod-5", "test-pod-6"}
	set := func(kv ...string) map[string]string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	lsel := func(kv ...string) labels.Selector { return labels.SelectorFromSet(set(kv...)) }
	fsel := func(kv ...string) fields.Selector { return fields.SelectorFromSet(set(kv...)) }
	byPod := func(b cache.ByObject) map[client.Object]cache.ByObject {
		return map[client.Object]cache.ByObject{pod: b}
	}
	nothing := lsel("no-present", "not-present")
	cases := []struct {
		name string
		opts cache.Options
		want []string
	}{
		{"when selectors are empty it has to inform about all the pods", cache.Options{}, all},
		{"type-level field selector matches one pod", cache.Options{ByObject: byPod(cache.ByObject{Field: fsel("metadata.name", "test-pod-2")})}, []string{"test-pod-2"}},
		{"global field selector matches one pod", cache.Options{DefaultFieldSelector: fsel("metadata.name", "test-pod-2")}, []string{"test-pod-2"}},
		{"type-level field selectors matches multiple pods", cache.Options{ByObject: byPod(cache.ByObject{Field: fsel("metadata.namespace", f.ns2)})}, []string{"test-pod-2", "test-pod-3", "test-pod-6"}},
		{"global field selectors matches multiple pods", cache.Options{DefaultFieldSelector: fsel("metadata.namespace", f.ns2)}, []string{"test-pod-2", "test-pod-3", "test-pod-6"}},
		{"type-level label selector matches one pod", cache.Options{ByObject: byPod(cache.ByObject{Label: lsel("test-label", "test-pod-4")})}, []string{"test-pod-4"}},
		{"namespaces configured, type-level label selector matches everything, overrides global selector", cache.Options{
			DefaultNamespaces:    map[string]cache.Config{f.ns1: {}},
			ByObject:             byPod(cache.ByObject{Label: labels.Everything()}),
			DefaultLabelSelector: lsel("does-not", "match-anything"),
		}, []string{"test-pod-1", "test-pod-5"}},
		{"namespaces configured, global selector is used", cache.Options{
			DefaultNamespaces:    map[string]cache.Config{f.ns2: {}},
			ByObject:             byPod(cache.ByObject{}),
			DefaultLabelSelector: lsel("common-label", "common"),
		}, []string{"test-pod-3"}},
		{"global label selector matches one pod", cache.Options{DefaultLabelSelector: lsel("test-label", "test-pod-4")}, []string{"test-pod-4"}},
		{"type-level label selector matches multiple pods", cache.Options{ByObject: byPod(cache.ByObject{Label: lsel("common-label", "common")})}, []string{"test-pod-3", "test-pod-4"}},
		{"global label selector matches multiple pods", cache.Options{DefaultLabelSelector: lsel("common-label", "common")}, []string{"test-pod-3", "test-pod-4"}},
		{"type-level label and field selector, matches one pod", cache.Options{ByObject: byPod(cache.ByObject{Label: lsel("common-label", "common"), Field: fsel("metadata.namespace", f.ns2)})}, []string{"test-pod-3"}},
		{"global label and field selector, matches one pod", cache.Options{DefaultLabelSelector: lsel("common-label", "common"), DefaultFieldSelector: fsel("metadata.namespace", f.ns2)}, []string{"test-pod-3"}},
		{"type-level label selector does not match, no results", cache.Options{ByObject: byPod(cache.ByObject{Label: lsel("new-label", "new")})}, nil},
		{"global label selector does not match, no results", cache.Options{DefaultLabelSelector: lsel("new-label", "new")}, nil},
		{"type-level field selector does not match, no results", cache.Options{ByObject: byPod(cache.ByObject{Field: fsel("metadata.namespace", "new")})}, nil},
		{"global field selector does not match, no results", cache.Options{DefaultFieldSelector: fsel("metadata.namespace", "new")}, nil},
		{"type-level field selector on namespace matches one pod", cache.Options{ByObject: byPod(cache.ByObject{Namespaces: map[string]cache.Config{f.ns2: {FieldSelector: fsel("metadata.name", "test-pod-2")}}})}, []string{"test-pod-2"}},
		{"type-level field selector on namespace doesn't match", cache.Options{ByObject: byPod(cache.ByObject{Namespaces: map[string]cache.Config{f.ns2: {FieldSelector: fsel("metadata.name", "test-pod-doesn-exist")}}})}, nil},
		{"global field selector on namespace matches one pod", cache.Options{DefaultNamespaces: map[string]cache.Config{f.ns2: {FieldSelector: fsel("metadata.name", "test-pod-2")}}}, []string{"test-pod-2"}},
		{"global field selector on namespace doesn't match", cache.Options{DefaultNamespaces: map[string]cache.Config{f.ns2: {FieldSelector: fsel("metadata.name", "test-pod-doesn-exist")}}}, nil},
		{"type-level label selector on namespace matches one pod", cache.Options{ByObject: byPod(cache.ByObject{Namespaces: map[string]cache.Config{f.ns2: {LabelSelector: lsel("test-label", "test-pod-2")}}})}, []string{"test-pod-2"}},
		{"type-level label selector on namespace doesn't match", cache.Options{ByObject: byPod(cache.ByObject{Namespaces: map[string]cache.Config{f.ns2: {LabelSelector: lsel("test-label", "test-pod-doesn-exist")}}})}, nil},
		{"global label selector on namespace matches one pod", cache.Options{DefaultNamespaces: map[string]cache.Config{f.ns2: {LabelSelector: lsel("test-label", "test-pod-2")}}}, []string{"test-pod-2"}},
		{"global label selector on namespace doesn't match", cache.Options{DefaultNamespaces: map[string]cache.Config{f.ns2: {LabelSelector: lsel("test-label", "test-pod-doesn-exist")}}}, nil},
		{"Only NamespaceAll in DefaultNamespaces returns all pods", cache.Options{DefaultNamespaces: map[string]cache.Config{metav1.NamespaceAll: {}}}, all},
		{"Only NamespaceAll in ByObject.Namespaces returns all pods", cache.Options{ByObject: byPod(cache.ByObject{Namespaces: map[string]cache.Config{metav1.NamespaceAll: {}}})}, all},
		{"NamespaceAll in DefaultNamespaces creates a cache for all Namespaces that are not in DefaultNamespaces", cache.Options{DefaultNamespaces: map[string]cache.Config{
			metav1.NamespaceAll: {},
			f.ns1:               {LabelSelector: nothing},
		}}, []string{"test-pod-2", "test-pod-3", "test-pod-4", "test-pod-6"}},
		{"NamespaceAll in ByObject.Namespaces creates a cache for all Namespaces that are not in ByObject.Namespaces", cache.Options{ByObject: byPod(cache.ByObject{Namespaces: map[string]cache.Config{
			metav1.NamespaceAll: {},
			f.ns1:               {LabelSelector: nothing},
		}})}, []string{"test-pod-2", "test-pod-3", "test-pod-4", "test-pod-6"}},
		// Not in the table: this port's own, for a selector per namespace
		// next to an all-namespaces entry with a selector of its own.
		{"NamespaceAll with a selector next to a namespace with another", cache.Options{ByObject: byPod(cache.ByObject{Namespaces: map[string]cache.Config{
			cache.AllNamespaces: {LabelSelector: lsel("common-label", "common")},
			f.ns2:               {LabelSelector: lsel("test-label", "test-pod-6")},
		}})}, []string{"test-pod-4", "test-pod-6"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := startCache(t, f.cfg, tc.opts)
			ctx := t.Context()
			for _, class := range []string{"structured", "unstructured", "metadata"} {
				list := newList(class, "Pod")
				if err := c.List(ctx, list); err != nil {
					t.Fatal(err)
				}
				var listed []string
				for _, o := range items(list) {
					if !isFixture(f, o) {
						continue
					}
					listed = append(listed, o.GetName())
					if err := c.Get(ctx, client.ObjectKeyFromObject(o), newObject(class, "Pod")); err != nil {
						t.Errorf("%s: get %s/%s: %v", class, o.GetNamespace(), o.GetName(), err)
					}
				}
				slices.Sort(listed)
				if !slices.Equal(listed, tc.want) {
					t.Errorf("%s: listed %v, want %v", class, listed, tc.want)
				}
			}
			inf, err := c.GetInformer(ctx, &corev1.Pod{})
			if err != nil {
				t.Fatal(err)
			}
			ev := newEvents()
			reg, err := inf.AddEventHandler(ev)
			if err != nil {
				t.Fatal(err)
			}
			await.Closed(t, "the handler to sync", reg.HasSyncedChecker().Done())
			var heard []string
			for len(ev.adds) > 0 {
				if o := <-ev.adds; isFixture(f, o) {
					heard = append(heard, o.GetName())
				}
			}
			slices.Sort(heard)
			if !slices.Equal(heard, tc.want) {
				t.Errorf("a handler heard %v, want %v", heard, tc.want)
			}
		})
	}
}

// TestUnsafeDisableDeepCopy_PerCall ports "using UnsafeDisableDeepCopy"
// with ListOptions and GetOptions, turned round as TestSuite_Reader's
// no-deep-copy case says: the objects are the cache's own (one pointer
// for two reads), and a program must not change them.
func TestUnsafeDisableDeepCopy_PerCall(t *testing.T) {
	f := newFixture(t)
	c := startCache(t, f.cfg, cache.Options{})
	ctx := t.Context()
	yes := true
	key := client.ObjectKey{Namespace: f.ns1, Name: "test-pod-1"}
	var a, b corev1.Pod
	if err := c.Get(ctx, key, &a, &client.GetOptions{UnsafeDisableDeepCopy: &yes}); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, key, &b, &client.GetOptions{UnsafeDisableDeepCopy: &yes}); err != nil {
		t.Fatal(err)
	}
	if reflect.ValueOf(a.Labels).Pointer() != reflect.ValueOf(b.Labels).Pointer() {
		t.Error("Get with UnsafeDisableDeepCopy copied")
	}
	var l1 corev1.PodList
	if err := c.List(ctx, &l1, client.InNamespace(f.ns1), client.UnsafeDisableDeepCopy); err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(l1.Items, func(p corev1.Pod) bool { return p.Name == "test-pod-1" })
	if i < 0 || reflect.ValueOf(l1.Items[i].Labels).Pointer() != reflect.ValueOf(a.Labels).Pointer() {
		t.Error("List with UnsafeDisableDeepCopy copied")
	}
	var c1 corev1.Pod
	if err := c.Get(ctx, key, &c1); err != nil {
		t.Fatal(err)
	}
	if reflect.ValueOf(c1.Labels).Pointer() == reflect.ValueOf(a.Labels).Pointer() {
		t.Error("Get without the option did not copy")
	}
}

func isFixture(f *fixture, o client.Object) bool {
	ns := o.GetNamespace()
	return ns == f.ns1 || ns == f.ns2 || ns == f.ns3
}

// waitCached waits until the cache's pod informer of class has ns/name.
func waitCached(t *testing.T, c cache.Cache, class, ns, name string) {
	t.Helper()
	inf, err := c.GetInformer(t.Context(), newObject(class, "Pod"))
	if err != nil {
		t.Fatal(err)
	}
	ev := newEvents()
	reg, err := inf.AddEventHandler(ev)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = inf.RemoveEventHandler(reg) }()
	await.Until(t, "the cache to have "+ns+"/"+name, ev.sig.Changed, func() bool {
		return c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, newObject(class, "Pod")) == nil
	})
}

// stoppedChan closes when inf reports that it has stopped.
func stoppedChan(inf cache.Informer) <-chan struct{} {
	return inf.(interface{ Stopped() <-chan struct{} }).Stopped()
}

// changeLabelInPlace changes a label of obj in the map obj holds (not in a
// copy of it), as a program that writes to a read would.
func changeLabelInPlace(obj client.Object) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		u.Object["metadata"].(map[string]any)["labels"].(map[string]any)["test-label"] = "changed"
		return
	}
	obj.GetLabels()["test-label"] = "changed"
}

// shared reports whether two reads share their maps: the same object of
// the cache, not copies.
func shared(a, b client.Object) bool {
	if ua, ok := a.(*unstructured.Unstructured); ok {
		return reflect.ValueOf(ua.Object).Pointer() == reflect.ValueOf(b.(*unstructured.Unstructured).Object).Pointer()
	}
	return reflect.ValueOf(a.GetLabels()).Pointer() == reflect.ValueOf(b.GetLabels()).Pointer()
}

func newObject(class, kind string) client.Object {
	gvk := corev1.SchemeGroupVersion.WithKind(kind)
	switch class {
	case "unstructured":
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		return u
	case "metadata":
		m := &metav1.PartialObjectMetadata{}
		m.SetGroupVersionKind(gvk)
		return m
	}
	switch kind {
	case "Pod":
		return &corev1.Pod{}
	case "Service":
		return &corev1.Service{}
	}
	panic(kind)
}

func newList(class, kind string) client.ObjectList {
	gvk := corev1.SchemeGroupVersion.WithKind(kind + "List")
	switch class {
	case "unstructured":
		u := &unstructured.UnstructuredList{}
		u.SetGroupVersionKind(gvk)
		return u
	case "metadata":
		m := &metav1.PartialObjectMetadataList{}
		m.SetGroupVersionKind(gvk)
		return m
	}
	switch kind {
	case "Pod":
		return &corev1.PodList{}
	case "Service":
		return &corev1.ServiceList{}
	}
	panic(kind)
}

func items(list client.ObjectList) []client.Object {
	var out []client.Object
	switch l := list.(type) {
	case *unstructured.UnstructuredList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	case *metav1.PartialObjectMetadataList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	case *corev1.PodList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	case *corev1.ServiceList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	}
	return out
}

func names(objs []client.Object) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.GetNamespace()+"/"+o.GetName())
	}
	return out
}

func podNames(pods []corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

func isKubeService(o client.Object) bool {
	return o.GetNamespace() == "default" && o.GetName() == "kubernetes"
}
