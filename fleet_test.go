package kloop_test

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/controller"
	"github.com/kloop-dev/kloop/samples/foo/apis/samplecontroller/v1alpha1"
	"github.com/kloop-dev/kloop/sharding"
)

func nopFleet(context.Context, kloop.ClusterKey) (controller.Result, error) {
	return controller.Result{}, nil
}

func TestClusterKey_StringNamesTheCluster(t *testing.T) {
	k := kloop.ClusterKey{Cluster: "east", Key: cache.Key{Namespace: "ns", Name: "n"}}
	if got := k.String(); got != "east/ns/n" {
		t.Errorf("String() = %q, want east/ns/n", got)
	}
}

func TestFleet_DeclarationsMakeNoRequestAndMistakesSayWhatToFix(t *testing.T) {
	app := newApp(t, kloop.Options{Scheme: kloop.NewScheme(v1alpha1.AddToScheme), Fleet: &kloop.Fleet{Home: "home"}})
	foos := kloop.Objects[*v1alpha1.Foo](app) // no discovery: it happens in each cluster as it joins
	deps := kloop.Objects[*appsv1.Deployment](app)
	if _, err := kloop.NewFleetController(app, "ok", nopFleet).For(foos).Owns(deps).
		Watches(kloop.MapTo(deps, func(*appsv1.Deployment) []kloop.ClusterKey { return nil })).Complete(); err != nil {
		t.Fatalf("a fleet controller over fleet handles: %v", err)
	}
	if _, err := foos.Get(t.Context(), "ns", "n"); err == nil || !strings.Contains(err.Error(), "In(key.Cluster)") {
		t.Errorf("Get on a fleet handle = %v, want an error pointing to In", err)
	}
	if _, err := foos.In("nowhere").Get(t.Context(), "ns", "n"); err == nil || !strings.Contains(err.Error(), `cluster "nowhere" is not joined`) {
		t.Errorf("In(nowhere).Get = %v, want an error naming the cluster", err)
	}
	if app.Cluster("home") != nil {
		t.Error("Cluster(home) before Run is not nil")
	}
	for _, tc := range []struct {
		name string
		err  func() error
		want string
	}{
		{"single-cluster controller over a fleet handle", func() error {
			_, err := kloop.NewController(app, "single", nop).For(foos).Complete()
			return err
		}, "In(key.Cluster)"},
		{"Owns before For", func() error {
			_, err := kloop.NewFleetController(app, "owns-first", nopFleet).Owns(deps).Complete()
			return err
		}, "Owns before For"},
		{"For twice", func() error {
			_, err := kloop.NewFleetController(app, "for-twice", nopFleet).For(foos).For(deps).Complete()
			return err
		}, "For given twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.err(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}

	single := newApp(t, kloop.Options{})
	if _, err := kloop.NewFleetController(single, "no-fleet", nopFleet).Complete(); err == nil || !strings.Contains(err.Error(), "Options.Fleet") {
		t.Errorf("NewFleetController without a fleet = %v, want an error naming Options.Fleet", err)
	}
	d := kloop.Objects[*appsv1.Deployment](single, kloop.ObjectsOptions{Resource: deployments})
	if d.In("") != d {
		t.Error(`In("") of a single-cluster handle is not the handle`)
	}
}

func TestFleet_NewRefusesBadOptions(t *testing.T) {
	if _, err := kloop.New(unreachable, kloop.Options{Logger: quiet(), Fleet: &kloop.Fleet{Home: "Not A Name"}}); err == nil || !strings.Contains(err.Error(), "Fleet.Home") {
		t.Errorf("New with a bad Fleet.Home = %v, want an error naming Fleet.Home", err)
	}
	if _, err := kloop.New(unreachable, kloop.Options{Logger: quiet(), Fleet: &kloop.Fleet{SecretSelector: "a=b"}}); err == nil || !strings.Contains(err.Error(), "SecretNamespace") {
		t.Errorf("New with a SecretSelector and no namespace = %v, want an error naming SecretNamespace", err)
	}
}

func TestFleet_ShardedDeclarationsSayWhatToFix(t *testing.T) {
	if _, err := kloop.New(unreachable, kloop.Options{Logger: quiet(), Fleet: &kloop.Fleet{Home: "home"},
		Sharding: &kloop.Sharding{Namespace: "ns", Key: sharding.ByUID}}); err == nil || !strings.Contains(err.Error(), "ByNamespace") {
		t.Errorf("New with a fleet sharded by UID = %v, want an error pointing to ByNamespace", err)
	}
	app := newApp(t, kloop.Options{Scheme: kloop.NewScheme(v1alpha1.AddToScheme), Fleet: &kloop.Fleet{Home: "home"}, Sharding: &kloop.Sharding{Namespace: "ns"}})
	foos := kloop.Objects[*v1alpha1.Foo](app)
	deps := kloop.Objects[*appsv1.Deployment](app)
	if _, err := kloop.NewFleetController(app, "sharded", nopFleet).For(foos).Owns(deps).Complete(); err != nil {
		t.Errorf("a sharded fleet controller with For: %v", err)
	}
	if _, err := kloop.NewFleetController(app, "no-for", nopFleet).
		Watches(kloop.MapTo(deps, func(*appsv1.Deployment) []kloop.ClusterKey { return nil })).Complete(); err == nil || !strings.Contains(err.Error(), "give the fleet controller For") {
		t.Errorf("a sharded fleet controller without For = %v, want an error asking for For", err)
	}
}
