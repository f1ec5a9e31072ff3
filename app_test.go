package kloop_test

import (
	"context"
	"errors"
	"log/slog"
	"os/exec"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/controller"
	"github.com/kloop-dev/kloop/samples/foo/apis/samplecontroller/v1alpha1"
	"github.com/kloop-dev/kloop/testenv/await"
)

// unreachable is a rest.Config of a port nothing listens on: a test that
// passes with it made no request.
var unreachable = &rest.Config{Host: "http://127.0.0.1:1"}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

func newApp(t *testing.T, opts kloop.Options) *kloop.App {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = quiet()
	}
	if opts.Registry == nil {
		opts.Registry = prometheus.NewRegistry()
	}
	app, err := kloop.New(unreachable, opts)
	if err != nil {
		t.Fatal(err)
	}
	return app
}

func nop(context.Context, cache.Key) (controller.Result, error) { return controller.Result{}, nil }

var deployments = appsv1.SchemeGroupVersion.WithResource("deployments")

func TestNew_RefusesANilConfigSayingWhatToPass(t *testing.T) {
	_, err := kloop.New(nil, kloop.Options{})
	if err == nil || !strings.Contains(err.Error(), "rest.Config") {
		t.Fatalf("New(nil) = %v, want an error naming the rest.Config", err)
	}
}

func TestNew_LeaderElectionWithoutANamespaceSaysWhichFlagToSet(t *testing.T) {
	_, err := kloop.New(unreachable, kloop.Options{LeaderElection: &kloop.LeaderElection{}, Logger: quiet(), Registry: prometheus.NewRegistry()})
	if err == nil || !strings.Contains(err.Error(), "--leader-elect-namespace") {
		t.Fatalf("New = %v, want an error naming --leader-elect-namespace", err)
	}
	// The App's namespace is the Lease's default.
	if _, err := kloop.New(unreachable, kloop.Options{Namespace: "team", LeaderElection: &kloop.LeaderElection{}, Logger: quiet(), Registry: prometheus.NewRegistry()}); err != nil {
		t.Fatalf("New with Namespace and leader election = %v, want nil", err)
	}
}

func TestObjects_WithResourceMakesNoRequestAndDeclaresAController(t *testing.T) {
	app := newApp(t, kloop.Options{})
	deps := kloop.Objects[*appsv1.Deployment](app, kloop.ObjectsOptions{Resource: deployments})
	if err := deps.Err(); err != nil {
		t.Fatalf("Objects with ObjectsOptions.Resource against an unreachable server: %v", err)
	}
	if deps.GVR() != deployments {
		t.Errorf("GVR %v, want %v", deps.GVR(), deployments)
	}
	c, err := kloop.NewController(app, "deps", nop).For(deps).Complete()
	if err != nil || c == nil {
		t.Fatalf("Complete = %v, %v", c, err)
	}
	if err := app.Err(); err != nil {
		t.Errorf("Err = %v, want nil", err)
	}
}

func TestObjects_ATypeOutsideTheSchemeFailsRunWithoutStartingAnything(t *testing.T) {
	app := newApp(t, kloop.Options{}) // client-go's scheme: no Foo
	foos := kloop.Objects[*v1alpha1.Foo](app, kloop.ObjectsOptions{Resource: v1alpha1.Resource})
	if err := foos.Err(); err == nil || !strings.Contains(err.Error(), "AddToScheme") {
		t.Fatalf("Err = %v, want one that says to add the type to the scheme", err)
	}
	if _, err := foos.Get(t.Context(), "ns", "x"); !errors.Is(err, foos.Err()) {
		t.Errorf("Get = %v, want the handle's error", err)
	}
	if _, err := foos.Create(t.Context(), &v1alpha1.Foo{}); !errors.Is(err, foos.Err()) {
		t.Errorf("Create = %v, want the handle's error", err)
	}
	_, err := kloop.NewController(app, "foo", nop).For(foos).Complete()
	if err == nil {
		t.Error("Complete with a failed handle = nil, want its error")
	}
	// Run starts nothing (no request to the unreachable server, no wait)
	// and returns every declaration error.
	err = app.Run(t.Context())
	if err == nil || !strings.Contains(err.Error(), "*v1alpha1.Foo") {
		t.Fatalf("Run = %v, want the declaration errors", err)
	}
}

func TestNewController_DeclarationMistakesNameWhatToFix(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = corev1.AddToScheme(scheme)
	_ = appsv1.AddToScheme(scheme)
	cms := corev1.SchemeGroupVersion.WithResource("configmaps")
	for _, tc := range []struct {
		name    string
		declare func(app *kloop.App) error
		want    string
	}{
		{"owns before for", func(app *kloop.App) error {
			_, err := kloop.NewController(app, "c", nop).Owns(kloop.Objects[*appsv1.Deployment](app, kloop.ObjectsOptions{Resource: deployments})).Complete()
			return err
		}, "give For first"},
		{"two fors", func(app *kloop.App) error {
			d := kloop.Objects[*appsv1.Deployment](app, kloop.ObjectsOptions{Resource: deployments})
			_, err := kloop.NewController(app, "c", nop).For(d).For(d).Complete()
			return err
		}, "For given twice"},
		{"nothing watched", func(app *kloop.App) error {
			_, err := kloop.NewController(app, "c", nop).Complete()
			return err
		}, "watches nothing"},
		{"no name", func(app *kloop.App) error {
			_, err := kloop.NewController(app, "", nop).For(kloop.Objects[*corev1.ConfigMap](app, kloop.ObjectsOptions{Resource: cms})).Complete()
			return err
		}, "no name"},
		{"keyed, nothing watched", func(app *kloop.App) error {
			_, err := kloop.NewKeyedController(app, "c", func(context.Context, string) (controller.Result, error) { return controller.Result{}, nil }).Complete()
			return err
		}, "give it Watches"},
		{"keyed, Watches(nil)", func(app *kloop.App) error {
			_, err := kloop.NewKeyedController(app, "c", func(context.Context, string) (controller.Result, error) { return controller.Result{}, nil }).Watches(nil).Complete()
			return err
		}, "Watches(nil)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			app := newApp(t, kloop.Options{Scheme: scheme})
			err := tc.declare(app)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Complete = %v, want an error saying %q", err, tc.want)
			}
			if runErr := app.Run(t.Context()); runErr == nil || !strings.Contains(runErr.Error(), tc.want) {
				t.Errorf("Run = %v, want the same error", runErr)
			}
		})
	}
}

func TestApp_RunTwiceIsAnError(t *testing.T) {
	app := newApp(t, kloop.Options{})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := app.Run(ctx); err != nil {
		t.Fatalf("Run with nothing declared and a done context = %v, want nil", err)
	}
	if err := app.Run(ctx); err == nil {
		t.Error("second Run = nil, want an error")
	}
}

func TestNew_NamespacesIsOneSetOfNamespacesForTheNamespacedKinds(t *testing.T) {
	app := newApp(t, kloop.Options{Namespaces: []string{"b", "a", "b"}})
	deps := kloop.Objects[*appsv1.Deployment](app, kloop.ObjectsOptions{Resource: deployments})
	nodes := kloop.Objects[*corev1.Node](app, kloop.ObjectsOptions{Resource: corev1.SchemeGroupVersion.WithResource("nodes"), ClusterScoped: true})
	if got := deps.Informer().Name(); got != "deployments.v1.apps [namespace=a,b]" {
		t.Errorf("namespaced kind's informer is %q, want one over namespaces a and b", got)
	}
	if got := nodes.Informer().Name(); got != "nodes.v1 [all namespaces]" {
		t.Errorf("cluster-scoped kind's informer is %q, want it whole", got)
	}

	one := newApp(t, kloop.Options{Namespaces: []string{"web"}})
	if o := one.Options(); o.Namespace != "web" || o.Namespaces != nil {
		t.Errorf("one namespace in Namespaces: Options() has Namespace %q, Namespaces %q; want it as Namespace", o.Namespace, o.Namespaces)
	}

	for _, tc := range []struct {
		opts kloop.Options
		want string
	}{
		{kloop.Options{Namespace: "a", Namespaces: []string{"b", "c"}}, "set one of them"},
		{kloop.Options{Namespaces: []string{"a", "Team_B"}}, `"Team_B" is not a namespace name`},
		{kloop.Options{Namespaces: []string{"a", ""}}, `"" is not a namespace name`},
	} {
		tc.opts.Logger, tc.opts.Registry = quiet(), prometheus.NewRegistry()
		if _, err := kloop.New(unreachable, tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v) = %v; want an error saying %q", tc.opts, err, tc.want)
		}
	}
}

func TestNew_WithoutTracesSaysWhatToSetWhenTheEnvironmentAsksForThem(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
	logs := await.NewLogs()
	if _, err := kloop.New(unreachable, kloop.Options{Logger: slog.New(logs), Registry: prometheus.NewRegistry()}); err != nil {
		t.Fatalf("New with OTEL_EXPORTER_OTLP_ENDPOINT and no Traces: %v", err)
	}
	if got := logs.String(); !strings.Contains(got, "set Options.Traces to what otlp.New") || !strings.Contains(got, "OTEL_TRACES_EXPORTER=none") {
		t.Errorf("New with OTEL_EXPORTER_OTLP_ENDPOINT and no Traces logged %q; want a warning saying to set Options.Traces or OTEL_TRACES_EXPORTER=none", got)
	}
	t.Setenv("OTEL_TRACES_EXPORTER", "none")
	logs = await.NewLogs()
	if _, err := kloop.New(unreachable, kloop.Options{Logger: slog.New(logs), Registry: prometheus.NewRegistry()}); err != nil {
		t.Fatalf("New with OTEL_TRACES_EXPORTER=none: %v", err)
	}
	if got := logs.String(); strings.Contains(got, "OTEL") {
		t.Errorf("New with OTEL_TRACES_EXPORTER=none logged %q; want nothing of traces", got)
	}
}

// A program that does not trace links no trace SDK, no exporter and no
// gRPC: only package otlp, which a program imports to trace, brings them.
func TestRootPackage_LinksNoTraceSDKExporterOrGRPC(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, heavy := range []string{"go.opentelemetry.io/otel/sdk", "go.opentelemetry.io/otel/exporters", "google.golang.org/grpc", "github.com/grpc-ecosystem/grpc-gateway", "github.com/kloop-dev/kloop/otlp"} {
			if dep == heavy || strings.HasPrefix(dep, heavy+"/") {
				t.Errorf("package kloop depends on %s: a program that does not trace would link it", dep)
			}
		}
	}
}
