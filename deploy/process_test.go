package deploy_test

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/kloop-dev/kloop/internal/authtest"
	"github.com/kloop-dev/kloop/internal/reexec"
	"github.com/kloop-dev/kloop/testenv"
)

var (
	buildMu sync.Mutex
	built   = map[string]string{}
)

// binary builds cmd/<name> of the main module once per test binary and
// returns its path.
func binary(t *testing.T, name string) string {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	if p, ok := built[name]; ok {
		return p
	}
	p := filepath.Join(binDir, name)
	c := exec.Command("go", "build", "-o", p, "./cmd/"+name)
	c.Dir = ".."
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/%s: %v\n%s", name, err, out)
	}
	built[name] = p
	return p
}

// saKubeconfig writes a kubeconfig that authenticates as the
// ServiceAccount ns/name with a token from the TokenRequest API, as a
// kubelet mounts one into the pod, and returns its path.
func saKubeconfig(t *testing.T, e *testenv.Env, ns, name string) string {
	t.Helper()
	token := authtest.Token(t, kubernetes.NewForConfigOrDie(e.Config), ns, name)
	kc := clientcmdapi.NewConfig()
	kc.Clusters["kloop"] = &clientcmdapi.Cluster{Server: e.APIServerURL, CertificateAuthorityData: e.Config.CAData}
	kc.AuthInfos["sa"] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts["sa"] = &clientcmdapi.Context{Cluster: "kloop", AuthInfo: "sa", Namespace: ns}
	kc.CurrentContext = "sa"
	p := filepath.Join(t.TempDir(), name+".kubeconfig")
	if err := clientcmd.WriteToFile(*kc, p); err != nil {
		t.Fatal(err)
	}
	return p
}

// tokenOf reads the token back from a kubeconfig saKubeconfig wrote.
func tokenOf(t *testing.T, path string) string {
	t.Helper()
	kc, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return kc.AuthInfos["sa"].Token
}

func saUser(ns, name string) string { return "system:serviceaccount:" + ns + ":" + name }

// freeAddr returns a loopback address with a port free right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// proc is a command binary running as it would in its pod.
type proc struct {
	cmd            *exec.Cmd
	stdout, stderr *reexec.Lines
	metrics        string // host:port
	health         string
}

// containerArgs returns the args of the Deployment's container with the
// listen addresses moved to free loopback ports.
func containerArgs(t *testing.T, dep *unstructured.Unstructured) (args []string, metrics, health string) {
	t.Helper()
	d := as[appsv1.Deployment](t, dep)
	metrics, health = freeAddr(t), freeAddr(t)
	c := d.Spec.Template.Spec.Containers[0]
	// $(VAR) from the downward API, as the kubelet expands it.
	vars := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace" {
			vars["$("+e.Name+")"] = d.Namespace
		}
	}
	for _, a := range c.Args {
		for k, v := range vars {
			a = strings.ReplaceAll(a, k, v)
		}
		switch {
		case strings.HasPrefix(a, "--metrics-bind-address="):
			a = "--metrics-bind-address=" + metrics
		case strings.HasPrefix(a, "--health-probe-bind-address="):
			a = "--health-probe-bind-address=" + health
		}
		args = append(args, a)
	}
	return args, metrics, health
}

// start runs the binary with args; it is killed when the test ends.
func start(t *testing.T, name, bin string, env []string, args ...string) *proc {
	t.Helper()
	c := exec.Command(bin, args...)
	c.Env = append(os.Environ(), env...)
	p := &proc{cmd: c}
	p.stdout, p.stderr = reexec.Start(t, name, c)
	return p
}

// forbidden matches the API server's 403 message for a verb on a
// resource, as client-go's errors carry it into the logs.
func forbidden(verb, resource string) *regexp.Regexp {
	return regexp.MustCompile(fmt.Sprintf(`cannot %s resource \\?"%s\\?"`, regexp.QuoteMeta(verb), regexp.QuoteMeta(resource)))
}
