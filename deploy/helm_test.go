package deploy_test

import (
	"bufio"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	gosmtp "github.com/emersion/go-smtp"
	"helm.sh/helm/v4/pkg/action"
	chartcommon "helm.sh/helm/v4/pkg/chart/common"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/kube"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"sigs.k8s.io/yaml"

	"github.com/kloop-dev/kloop/testenv"
)

// The chart under test and kubewatch's own, vendored from its repository.
const (
	notifierChart  = "charts/notifier"
	kubewatchChart = "testdata/kubewatch-chart/kubewatch"
)

func loadChart(t testing.TB, dir string) *chartv2.Chart {
	t.Helper()
	ch, err := loader.Load(dir)
	if err != nil {
		t.Fatalf("load chart %s: %v", dir, err)
	}
	return ch
}

// valuesFile reads a values file as `helm -f` does.
func valuesFile(t testing.TB, path string) map[string]any {
	t.Helper()
	v, err := chartcommon.ReadValuesFile(path)
	if err != nil {
		t.Fatalf("values file %s: %v", path, err)
	}
	return v
}

// writeValues writes vals as a values file and returns its path.
func writeValues(t testing.TB, vals map[string]any) string {
	t.Helper()
	b, err := yaml.Marshal(vals)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// helmTemplate renders the chart in dir as `helm template` does: on the
// client, with Helm's default capabilities.
func helmTemplate(t testing.TB, dir, release, ns string, vals map[string]any) []*unstructured.Unstructured {
	t.Helper()
	in := action.NewInstall(action.NewConfiguration(action.ConfigurationSetLogger(slog.DiscardHandler)))
	in.DryRunStrategy = action.DryRunClient
	in.Replace = true
	in.ReleaseName, in.Namespace = release, ns
	r, err := in.Run(loadChart(t, dir), vals)
	if err != nil {
		t.Fatalf("helm template %s %s: %v", release, dir, err)
	}
	return decode(t, []byte(asRelease(t, r).Manifest))
}

func asRelease(t testing.TB, r any) *releasev1.Release {
	t.Helper()
	rel, ok := r.(*releasev1.Release)
	if !ok {
		t.Fatalf("Helm returned a %T, want a *release.Release", r)
	}
	return rel
}

// helm is Helm's SDK on a control plane: releases stored as Secrets in ns,
// objects applied as `helm install` and `helm upgrade` apply them.
type helm struct {
	cfg *action.Configuration
	ns  string
}

func newHelm(t *testing.T, e *testenv.Env, ns string) *helm {
	t.Helper()
	flags := genericclioptions.NewConfigFlags(false)
	kc, cache := e.KubeconfigPath, t.TempDir()
	flags.KubeConfig, flags.Namespace, flags.CacheDir = &kc, &ns, &cache
	cfg := action.NewConfiguration(action.ConfigurationSetLogger(slog.DiscardHandler))
	if err := cfg.Init(flags, ns, "secret"); err != nil {
		t.Fatal(err)
	}
	return &helm{cfg: cfg, ns: ns}
}

// install is `helm install --create-namespace release dir -f values`,
// without waiting for the pods (nothing runs them here).
func (h *helm) install(t *testing.T, release, dir string, vals map[string]any) *releasev1.Release {
	t.Helper()
	in := action.NewInstall(h.cfg)
	in.ReleaseName, in.Namespace, in.CreateNamespace = release, h.ns, true
	in.WaitStrategy = kube.HookOnlyStrategy
	r, err := in.RunWithContext(t.Context(), loadChart(t, dir), vals)
	if err != nil {
		t.Fatalf("helm install %s %s: %v", release, dir, err)
	}
	return asRelease(t, r)
}

// upgrade is `helm upgrade release dir -f values`.
func (h *helm) upgrade(t *testing.T, release, dir string, vals map[string]any) *releasev1.Release {
	t.Helper()
	up := action.NewUpgrade(h.cfg)
	up.Namespace = h.ns
	up.WaitStrategy = kube.HookOnlyStrategy
	r, err := up.RunWithContext(t.Context(), release, loadChart(t, dir), vals)
	if err != nil {
		t.Fatalf("helm upgrade %s %s: %v", release, dir, err)
	}
	return asRelease(t, r)
}

// request is one request a receiver got.
type request struct {
	path, contentType, body string
}

// receiver is a plain HTTP server on loopback that takes every handler's
// HTTP requests (Slack's Web API included: it answers ok) and hands them
// to the test in order.
type receiver struct {
	URL string
	got chan request
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{got: make(chan request, 1000)}
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		select {
		case r.got <- request{path: req.URL.Path, contentType: req.Header.Get("Content-Type"), body: string(b)}:
		default:
			http.Error(w, "the test's receiver is full", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok":true,"channel":"C1","ts":"1.1","code":0,"StatusCode":0}`)
	}))
	t.Cleanup(s.Close)
	r.URL = s.URL
	return r
}

// smtpReceiver is an SMTP server on loopback (emersion/go-smtp) that hands
// each mail's data to the test.
type smtpReceiver struct {
	Addr string
	got  chan request
}

func newSMTPReceiver(t *testing.T) *smtpReceiver {
	r := &smtpReceiver{got: make(chan request, 1000)}
	s := gosmtp.NewServer(r)
	s.Domain = "localhost"
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.Addr = l.Addr().String()
	done := make(chan error, 1)
	go func() { done <- s.Serve(l) }()
	t.Cleanup(func() {
		_ = s.Close()
		if err := <-done; err != nil && !errors.Is(err, gosmtp.ErrServerClosed) {
			t.Errorf("smtp receiver: %v", err)
		}
	})
	return r
}

func (r *smtpReceiver) NewSession(*gosmtp.Conn) (gosmtp.Session, error) {
	return &smtpSession{r: r}, nil
}

type smtpSession struct {
	r  *smtpReceiver
	to string
}

func (s *smtpSession) Reset()                                      {}
func (s *smtpSession) Logout() error                               { return nil }
func (s *smtpSession) Mail(string, *gosmtp.MailOptions) error      { return nil }
func (s *smtpSession) Rcpt(to string, _ *gosmtp.RcptOptions) error { s.to = to; return nil }
func (s *smtpSession) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	select {
	case s.r.got <- request{path: s.to, body: string(b)}:
		return nil
	default:
		return errors.New("the test's receiver is full")
	}
}

// connectProxy is an HTTPS proxy on loopback that refuses every CONNECT
// and hands its target (host:port) to the test: a notifier run with
// HTTPS_PROXY pointing here shows where it would send, and sends nothing
// off this machine.
type connectProxy struct {
	URL     string
	targets chan string
}

func newConnectProxy(t *testing.T) *connectProxy {
	p := &connectProxy{targets: make(chan string, 1000)}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.URL = "http://" + l.Addr().String()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			req, err := http.ReadRequest(bufio.NewReader(c))
			if err == nil && req.Method == http.MethodConnect {
				select {
				case p.targets <- req.Host:
				default:
				}
			}
			io.WriteString(c, "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
			c.Close()
		}
	}()
	t.Cleanup(func() { l.Close(); <-done })
	return p
}

// configOf is the .kubewatch.yaml of the chart's Secret.
func configOf(t testing.TB, objs []*unstructured.Unstructured) []byte {
	t.Helper()
	for _, o := range ofKind(objs, "Secret") {
		if strings.HasSuffix(o.GetName(), "-config") {
			if s, ok, _ := unstructured.NestedString(o.Object, "stringData", ".kubewatch.yaml"); ok {
				return []byte(s)
			}
		}
	}
	t.Fatal("no Secret <release>-config with a .kubewatch.yaml among the rendered objects")
	return nil
}
