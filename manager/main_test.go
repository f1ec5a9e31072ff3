package manager_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kloop-dev/kloop/testenv"
)

var (
	envOnce sync.Once
	env     *testenv.Env
	envErr  error
)

// sharedEnv starts one control plane for the package's end-to-end tests,
// on first use; TestMain stops it.
func sharedEnv(t *testing.T) *testenv.Env {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a control plane")
	}
	envOnce.Do(func() { env, envErr = testenv.Start(context.Background(), testenv.Options{}) })
	if envErr != nil {
		t.Fatalf("start control plane: %v", envErr)
	}
	return env
}

func newNamespace(t *testing.T, kc kubernetes.Interface, name string) string {
	t.Helper()
	ns, err := kc.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	return ns.Name
}

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(signalHelper())
	}
	code := m.Run()
	if env != nil {
		if code != 0 {
			fmt.Fprintf(os.Stderr, "control-plane logs:\n%s\n", env.LogTails(30))
		}
		env.Stop()
	}
	if code == 0 {
		if err := goleak.Find(testenv.GoleakIgnores()...); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
