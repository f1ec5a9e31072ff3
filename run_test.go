package kloop_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"

	"github.com/kloop-dev/kloop"
)

func TestRun_ReturnsTheFirstSetupErrorAndRunsNoLaterSetup(t *testing.T) {
	errSetup := errors.New("setup failed")
	var handles *kloop.Handle[*corev1.Pod]
	later := false
	err := kloop.Run(context.Background(), unreachable, kloop.Options{Logger: quiet(), Registry: prometheus.NewRegistry()},
		func(app *kloop.App) error {
			handles = kloop.Objects[*corev1.Pod](app, kloop.ObjectsOptions{Resource: corev1.SchemeGroupVersion.WithResource("pods")})
			return errSetup
		},
		func(*kloop.App) error { later = true; return nil },
	)
	if !errors.Is(err, errSetup) {
		t.Errorf("Run = %v, want the setup's error", err)
	}
	if handles == nil || later {
		t.Errorf("first setup ran: %v; later setup ran: %v; want only the first", handles != nil, later)
	}
}

func TestRun_ReturnsADeclarationErrorWithoutStarting(t *testing.T) {
	// A kind the scheme does not hold: the App fails it at Run, before any
	// request (the config points nowhere).
	err := kloop.Run(context.Background(), unreachable, kloop.Options{Logger: quiet(), Registry: prometheus.NewRegistry()},
		func(app *kloop.App) error {
			kloop.Objects[*notInScheme](app, kloop.ObjectsOptions{Resource: corev1.SchemeGroupVersion.WithResource("pods")})
			return nil
		})
	if err == nil || !strings.Contains(err.Error(), "does not register") {
		t.Fatalf("Run = %v, want the declaration error saying the scheme does not register the type", err)
	}
}

// notInScheme is a type no scheme registers.
type notInScheme struct{ corev1.Pod }
