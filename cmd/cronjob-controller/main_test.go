package main

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/kloop-dev/kloop/cli"
	"github.com/kloop-dev/kloop/client"
	"github.com/kloop-dev/kloop/internal/reexec"
	"github.com/kloop-dev/kloop/manifest"
	"github.com/kloop-dev/kloop/samples/cronjob"
	batch "github.com/kloop-dev/kloop/samples/cronjob/apis/batch/v1"
	"github.com/kloop-dev/kloop/testenv"
	"github.com/kloop-dev/kloop/testenv/await"
)

func TestMain(m *testing.M) {
	testenv.DetectMutations()
	// Re-executed by a test: behave as the cronjob-controller command itself.
	reexec.Main(func(args []string) int {
		os.Args = append([]string{"cronjob-controller"}, args...)
		main()
		return 0
	})
	goleak.VerifyTestMain(m, testenv.GoleakIgnores()...)
}

func TestCronJobController_HelpNamesItsFlagsAndABadArgumentExitsTwo(t *testing.T) {
	var stdout strings.Builder
	if code := cli.Run(t.Context(), command(), []string{"--help"}, &stdout, io.Discard); code != 0 {
		t.Errorf("--help exited %d, want 0", code)
	}
	for _, flag := range []string{"--kubeconfig", "--namespace", "--workers", "--webhook-bind-address", "--webhook-cert-dir", "--webhook-local"} {
		if !strings.Contains(stdout.String(), flag) {
			t.Errorf("--help output lacks %q:\n%s", flag, stdout.String())
		}
	}
	if code := cli.Run(t.Context(), command(), []string{"extra"}, io.Discard, io.Discard); code != 2 {
		t.Errorf("an unexpected argument exited %d, want 2", code)
	}
}

func TestCronJobController_LocalWebhooksDefaultAndValidateAndSIGTERMRemovesThemAndExitsZero(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a control plane")
	}
	e := testenv.StartT(t, testenv.Options{})
	ctx := t.Context()
	installCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := manifest.InstallCRD(installCtx, e.Config, cronjob.CRDYAML); err != nil {
		t.Fatal(err)
	}
	cmd := reexec.Command(context.Background(), "--kubeconfig", e.KubeconfigPath, "--namespace", "default", "--webhook-local")
	_, stderr := reexec.Start(t, "cronjob-controller", cmd)
	stderr.WaitFor(t, "the local webhooks installed", regexp.MustCompile(`Installed the local webhook configurations`))

	c, err := client.New(e.Config, client.Options{Scheme: cronjob.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	cjs, err := client.NewResource[*batch.CronJob](c, batch.Resource)
	if err != nil {
		t.Fatal(err)
	}
	bad := &batch.CronJob{ObjectMeta: metav1.ObjectMeta{Name: "bad", Namespace: "default"}, Spec: batch.CronJobSpec{Schedule: "every minute"}}
	bad.Spec.JobTemplate.Spec.Template.Spec.Containers = []corev1.Container{{Name: "c", Image: "busybox"}}
	if _, err := cjs.Create(ctx, bad); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.schedule") {
		t.Errorf("create with schedule \"every minute\": %v, want Invalid naming spec.schedule", err)
	}
	good := bad.DeepCopy()
	good.Name, good.Spec.Schedule = "good", "*/5 * * * *"
	got, err := cjs.Create(ctx, good)
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.ConcurrencyPolicy != batch.AllowConcurrent || got.Spec.FailedJobsHistoryLimit == nil {
		t.Errorf("created CronJob not defaulted: %+v", got.Spec)
	}
	await.Object(t, "the finalizer on CronJob good", dynamic.NewForConfigOrDie(e.Config).Resource(batch.Resource).Namespace("default"), "good",
		func(u *unstructured.Unstructured) bool { return slices.Contains(u.GetFinalizers(), cronjob.Finalizer) })

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	stderr.WaitEOF(t)
	var exitErr *exec.ExitError
	if err := cmd.Wait(); errors.As(err, &exitErr) {
		t.Errorf("cronjob-controller exited with status %d after SIGTERM, want 0", exitErr.ExitCode())
	} else if err != nil {
		t.Errorf("cronjob-controller: %v", err)
	}
	kc := kubernetes.NewForConfigOrDie(e.Config)
	if _, err := kc.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, cronjob.ControllerName+"-local", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the local validating webhook configuration after the stop: %v, want it gone", err)
	}
}
