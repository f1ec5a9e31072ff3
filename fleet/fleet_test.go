package fleet_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/client-go/rest"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/controller"
	"github.com/kloop-dev/kloop/fleet"
	"github.com/kloop-dev/kloop/samples/foo/apis/samplecontroller/v1alpha1"
	"github.com/kloop-dev/kloop/sharding"
)

// unreachable is a rest.Config of a port nothing listens on: a test that
// passes with it made no request.
var unreachable = &rest.Config{Host: "http://127.0.0.1:1"}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

func newApp(t *testing.T, opts kloop.Options) *kloop.App {
	t.Helper()
	opts.Logger, opts.Registry = quiet(), prometheus.NewRegistry()
	app, err := kloop.New(unreachable, opts)
	if err != nil {
		t.Fatal(err)
	}
	return app
}

func newFleet(t *testing.T, app *kloop.App, opts fleet.Options) *fleet.Fleet {
	t.Helper()
	f, err := fleet.New(app, opts)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func nopFleet(context.Context, fleet.Key) (controller.Result, error) {
	return controller.Result{}, nil
}

func TestKey_StringNamesTheCluster(t *testing.T) {
	k := fleet.Key{Cluster: "east", Key: cache.Key{Namespace: "ns", Name: "n"}}
	if got := k.String(); got != "east/ns/n" {
		t.Errorf("String() = %q, want east/ns/n", got)
	}
}

func TestFleet_DeclarationsMakeNoRequestAndMistakesSayWhatToFix(t *testing.T) {
	app := newApp(t, kloop.Options{Scheme: kloop.NewScheme(v1alpha1.AddToScheme)})
	f := newFleet(t, app, fleet.Options{Home: "home"})
	foos := fleet.Objects[*v1alpha1.Foo](f) // no discovery: it happens in each cluster as it joins
	deps := fleet.Objects[*appsv1.Deployment](f)
	if _, err := fleet.NewController(f, "ok", nopFleet).For(foos).Owns(deps).
		Watches(fleet.MapTo(deps, func(*appsv1.Deployment) []fleet.Key { return nil })).Complete(); err != nil {
		t.Fatalf("a fleet controller over fleet handles: %v", err)
	}
	if _, err := foos.In("nowhere").Get(t.Context(), "ns", "n"); err == nil || !strings.Contains(err.Error(), `cluster "nowhere" is not joined`) {
		t.Errorf("In(nowhere).Get = %v, want an error naming the cluster", err)
	}
	if foos.In("nowhere").Informer() != nil {
		t.Error("In(nowhere).Informer() is not nil")
	}
	if f.Cluster("home") != nil {
		t.Error("Cluster(home) before Run is not nil")
	}
	other := newFleet(t, newApp(t, kloop.Options{Scheme: kloop.NewScheme(v1alpha1.AddToScheme)}), fleet.Options{Home: "home"})
	unknown := fleet.Objects[*v1alpha1.Foo](newFleet(t, newApp(t, kloop.Options{}), fleet.Options{}))
	for _, tc := range []struct {
		name string
		err  func() error
		want string
	}{
		{"Owns before For", func() error {
			_, err := fleet.NewController(f, "owns-first", nopFleet).Owns(deps).Complete()
			return err
		}, "Owns before For"},
		{"For twice", func() error {
			_, err := fleet.NewController(f, "for-twice", nopFleet).For(foos).For(deps).Complete()
			return err
		}, "For given twice"},
		{"another fleet's handle", func() error {
			_, err := fleet.NewController(other, "other", nopFleet).For(foos).Complete()
			return err
		}, "another fleet"},
		{"a kind the scheme lacks", func() error {
			_, err := fleet.NewController(f, "unknown", nopFleet).For(unknown).Complete()
			return err
		}, "AddToScheme"},
		{"AddIndex without a function", func() error { return foos.AddIndex("x", nil) }, "nil"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.err(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestFleet_NewRefusesBadOptions(t *testing.T) {
	if _, err := fleet.New(newApp(t, kloop.Options{}), fleet.Options{Home: "Not A Name"}); err == nil || !strings.Contains(err.Error(), "Options.Home") {
		t.Errorf("New with a bad Home = %v, want an error naming Options.Home", err)
	}
	if _, err := fleet.New(newApp(t, kloop.Options{}), fleet.Options{SecretSelector: "a=b"}); err == nil || !strings.Contains(err.Error(), "SecretNamespace") {
		t.Errorf("New with a SecretSelector and no namespace = %v, want an error naming SecretNamespace", err)
	}
}

func TestFleet_ShardedDeclarationsSayWhatToFix(t *testing.T) {
	byUID := newApp(t, kloop.Options{Sharding: &kloop.Sharding{Namespace: "ns", Key: sharding.ByUID}})
	if _, err := fleet.New(byUID, fleet.Options{Home: "home"}); err == nil || !strings.Contains(err.Error(), "ByNamespace") {
		t.Errorf("New with a fleet sharded by UID = %v, want an error pointing to ByNamespace", err)
	}
	app := newApp(t, kloop.Options{Scheme: kloop.NewScheme(v1alpha1.AddToScheme), Sharding: &kloop.Sharding{Namespace: "ns"}})
	f := newFleet(t, app, fleet.Options{Home: "home"})
	foos := fleet.Objects[*v1alpha1.Foo](f)
	deps := fleet.Objects[*appsv1.Deployment](f)
	if _, err := fleet.NewController(f, "sharded", nopFleet).For(foos).Owns(deps).Complete(); err != nil {
		t.Errorf("a sharded fleet controller with For: %v", err)
	}
	if _, err := fleet.NewController(f, "no-for", nopFleet).
		Watches(fleet.MapTo(deps, func(*appsv1.Deployment) []fleet.Key { return nil })).Complete(); err == nil || !strings.Contains(err.Error(), "For kind") {
		t.Errorf("a sharded fleet controller without For = %v, want an error asking for a For kind", err)
	}
}
