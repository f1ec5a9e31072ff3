package webhook_test

import (
	"context"
	"fmt"
	"log/slog"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/kloop-dev/kloop/webhook"
)

// The paths are controller-runtime's, so the manifests kubebuilder makes
// from +kubebuilder:webhook markers call them.
func ExampleMutatePath() {
	fmt.Println(webhook.MutatePath(batchv1.SchemeGroupVersion.WithKind("CronJob")))
	fmt.Println(webhook.ValidatePath(corev1.SchemeGroupVersion.WithKind("Pod")))
	// Output:
	// /mutate-batch-v1-cronjob
	// /validate--v1-pod
}

// A server of one's own, with a typed defaulter; most programs use
// kloop.NewWebhook, which does this for them.
func ExampleMutating() {
	srv, err := webhook.NewServer(webhook.ServerOptions{Addr: ":9443", CertDir: "/tmp/k8s-webhook-server/serving-certs"})
	if err != nil {
		panic(err) // the certificate or key cannot be read: the error names the file
	}
	gvk := corev1.SchemeGroupVersion.WithKind("ConfigMap")
	srv.Handle(webhook.MutatePath(gvk), webhook.Mutating(clientgoscheme.Scheme, func(_ context.Context, cm *corev1.ConfigMap) error {
		if cm.Labels == nil {
			cm.Labels = map[string]string{}
		}
		cm.Labels["defaulted"] = "true"
		return nil
	}, slog.Default()))
	_ = srv // manager.Add(srv), or srv.Start(ctx)
}
