// Command cbor measures kloop's informer of a custom resource reading CBOR
// against the same informer reading JSON, and says what the API server
// answers when it is not asked to serve CBOR.
//
// Custom resources have no protobuf encoding; the API server can serve
// them as CBOR behind its CBORServingAndStorage feature gate (alpha, off
// by default in v1.37), and client-go asks for it behind its own
// ClientsAllowCBOR gate (KUBE_FEATURE_ClientsAllowCBOR=true in the
// environment, or features.ReplaceFeatureGates). kloop's informers of
// *unstructured.Unstructured go through client-go's dynamic client, so
// they read CBOR where both gates are on.
//
// First a control plane with its default gates is asked for a custom
// resource list with "Accept: application/cbor", and its answer printed.
// Then a control plane with CBORServingAndStorage on is seeded with N Foos
// (samples/foo's CRD) and each side syncs a kloop informer of the Foos
// (OfResource[*unstructured.Unstructured]) from a fresh factory, in
// rotating order: "json" with ClientsAllowCBOR off, "cbor" with it on; and
// likewise "json-typed" and "cbor-typed" for an informer of *v1alpha1.Foo
// (OfResource with the Foo's scheme, which asks for CBOR under the gate). A
// side counts the response bytes it read (its bytes on the wire, after
// HTTP/2 framing is taken off) and the content types it was answered in.
//
//	cd bench && go run ./cmd/cbor -n 5000
//
// RESULT lines, medians of the rounds, CBOR against JSON:
//
//	RESULT cbor-sync-seconds kloop=... peer=... ratio=... unit=s peer_name=json
//	RESULT cbor-wire-bytes kloop=... peer=... ratio=... unit=B peer_name=json
//	RESULT cbor-sync-seconds-typed ... (and cbor-wire-bytes-typed)
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	clientfeatures "k8s.io/client-go/features"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/kloop-dev/kloop/informer"
	"github.com/kloop-dev/kloop/manifest"
	"github.com/kloop-dev/kloop/samples/foo"
	"github.com/kloop-dev/kloop/samples/foo/apis/samplecontroller/v1alpha1"
	"github.com/kloop-dev/kloop/testenv"
)

const namespace = "bench"

func main() {
	n := flag.Int("n", 5000, "Foos to seed")
	rounds := flag.Int("rounds", 3, "rounds (each syncs both sides once)")
	flag.Parse()
	klog.SetSlogLogger(slog.New(slog.DiscardHandler))
	if err := run(*n, *rounds); err != nil {
		fmt.Fprintln(os.Stderr, "cbor benchmark:", err)
		os.Exit(1)
	}
}

// gates are client-go's feature gates with ClientsAllowCBOR set as asked.
type gates struct {
	base clientfeatures.Gates
	cbor bool
}

func (g gates) Enabled(f clientfeatures.Feature) bool {
	if f == clientfeatures.ClientsAllowCBOR {
		return g.cbor
	}
	return g.base.Enabled(f)
}

func run(n, rounds int) error {
	ctx := context.Background()
	base := clientfeatures.FeatureGates()
	fmt.Printf("cbor benchmark: N=%d Foos (samples/foo's CRD), %d rounds\n", n, rounds)

	// The default server's answer.
	answer, err := probeDefault(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("  kube-apiserver v1.37.2, default feature gates, GET foos with Accept: application/cbor: %s\n", answer)

	env, err := testenv.Start(ctx, testenv.Options{
		Logger:       slog.New(slog.DiscardHandler),
		FeatureGates: map[string]bool{"CBORServingAndStorage": true},
	})
	if err != nil {
		return err
	}
	defer env.Stop()
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = 2000, 4000
	if err := manifest.InstallCRD(ctx, cfg, foo.CRDYAML); err != nil {
		return err
	}
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	clientfeatures.ReplaceFeatureGates(gates{base: base, cbor: false})
	if err := seed(ctx, cfg, n); err != nil {
		return err
	}
	fmt.Printf("  seeded %d Foos\n", n)

	sides := []string{"json", "cbor", "json-typed", "cbor-typed"}
	type result struct {
		sync  time.Duration
		bytes int64
	}
	results := map[string][]result{}
	for r := range rounds {
		for i := range sides {
			side := sides[(i+r)%len(sides)]
			clientfeatures.ReplaceFeatureGates(gates{base: base, cbor: strings.HasPrefix(side, "cbor")})
			sync, bytes, types, err := syncOnce(cfg, n, strings.HasSuffix(side, "-typed"))
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", r+1, side, err)
			}
			fmt.Printf("  round %d %-10s sync %6.3fs  %9d bytes read  answered in %s\n", r+1, side, sync.Seconds(), bytes, strings.Join(types, ", "))
			results[side] = append(results[side], result{sync, bytes})
		}
	}
	med := func(side string, f func(result) float64) float64 {
		v := make([]float64, 0, len(results[side]))
		for _, r := range results[side] {
			v = append(v, f(r))
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	syncOf := func(r result) float64 { return r.sync.Seconds() }
	bytesOf := func(r result) float64 { return float64(r.bytes) }
	for _, suffix := range []string{"", "-typed"} {
		c, j := med("cbor"+suffix, syncOf), med("json"+suffix, syncOf)
		fmt.Printf("RESULT cbor-sync-seconds%s kloop=%.3f peer=%.3f ratio=%.2f unit=s peer_name=json\n", suffix, c, j, c/j)
		c, j = med("cbor"+suffix, bytesOf), med("json"+suffix, bytesOf)
		fmt.Printf("RESULT cbor-wire-bytes%s kloop=%.0f peer=%.0f ratio=%.2f unit=B peer_name=json\n", suffix, c, j, c/j)
	}
	return nil
}

// probeDefault starts a control plane with its default gates, installs
// the CRD and asks for the Foos as CBOR: the server's answer.
func probeDefault(ctx context.Context) (string, error) {
	env, err := testenv.Start(ctx, testenv.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return "", err
	}
	defer env.Stop()
	if err := manifest.InstallCRD(ctx, env.Config, foo.CRDYAML); err != nil {
		return "", err
	}
	hc, err := rest.HTTPClientFor(env.Config)
	if err != nil {
		return "", err
	}
	gvr := v1alpha1.SchemeGroupVersion.WithResource("foos")
	url := fmt.Sprintf("%s/apis/%s/%s/foos", strings.TrimSuffix(env.Config.Host, "/"), gvr.Group, gvr.Version)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Accept", "application/cbor")
	resp, err := hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 600))
	return fmt.Sprintf("%s, Content-Type %q: %s", resp.Status, resp.Header.Get("Content-Type"), strings.Join(strings.Fields(string(body)), " ")), nil
}

// seed creates n Foos with a few concurrent writers.
func seed(ctx context.Context, cfg *rest.Config, n int) error {
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	gvr := v1alpha1.SchemeGroupVersion.WithResource("foos")
	const writers = 8
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			for i := w; i < n; i += writers {
				u := &unstructured.Unstructured{Object: map[string]any{
					"apiVersion": v1alpha1.SchemeGroupVersion.String(),
					"kind":       "Foo",
					"metadata": map[string]any{
						"name":   fmt.Sprintf("foo-%06d", i),
						"labels": map[string]any{"app": "bench", "shard": fmt.Sprintf("s%d", i%16)},
					},
					"spec": map[string]any{"deploymentName": fmt.Sprintf("foo-%06d", i), "replicas": int64(i%5 + 1)},
				}}
				if _, err := dc.Resource(gvr).Namespace(namespace).Create(ctx, u, metav1.CreateOptions{}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// counter counts the response bytes read through it and the content types
// of the responses.
type counter struct {
	rt    http.RoundTripper
	bytes *atomic.Int64
	mu    *sync.Mutex
	types map[string]bool
}

func (c counter) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.rt.RoundTrip(r)
	if err != nil {
		return resp, err
	}
	c.mu.Lock()
	c.types[resp.Header.Get("Content-Type")] = true
	c.mu.Unlock()
	resp.Body = countingBody{resp.Body, c.bytes}
	return resp, nil
}

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

// syncOnce syncs a fresh kloop informer of the Foos (of *v1alpha1.Foo if
// typed, else of *unstructured.Unstructured) and returns how long it took,
// the bytes it read and the content types it was answered in.
func syncOnce(cfg *rest.Config, n int, typed bool) (time.Duration, int64, []string, error) {
	var bytes atomic.Int64
	var mu sync.Mutex
	types := map[string]bool{}
	c := rest.CopyConfig(cfg)
	c.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return counter{rt: rt, bytes: &bytes, mu: &mu, types: types}
	})
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return 0, 0, nil, err
	}
	f := informer.NewFactory(c, informer.FactoryOptions{Logger: slog.New(slog.DiscardHandler), Scheme: scheme})
	var inf interface {
		WaitForSync(context.Context) error
		Status() informer.Status
	}
	var err error
	if typed {
		inf, err = informer.OfResource[*v1alpha1.Foo](f, v1alpha1.Resource, informer.Scope{Namespace: namespace})
	} else {
		inf, err = informer.OfResource[*unstructured.Unstructured](f, v1alpha1.Resource, informer.Scope{Namespace: namespace})
	}
	if err != nil {
		return 0, 0, nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	began := time.Now()
	go func() { done <- f.Start(ctx) }()
	waitCtx, stop := context.WithTimeout(ctx, 5*time.Minute)
	err = inf.WaitForSync(waitCtx)
	stop()
	took := time.Since(began)
	got := inf.Status().Objects
	cancel()
	if serr := <-done; err == nil {
		err = serr
	}
	if err == nil && got != n {
		err = fmt.Errorf("cached %d Foos, want %d", got, n)
	}
	mu.Lock()
	defer mu.Unlock()
	var ts []string
	for t := range types {
		ts = append(ts, fmt.Sprintf("%q", t))
	}
	slices.Sort(ts)
	return took, bytes.Load(), ts, err
}
