package fleet

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// kubeconfig returns a kubeconfig with the given contexts, each on a
// cluster and user of its own name; change edits it before it is written.
func kubeconfig(t *testing.T, current string, contexts []string, change func(*clientcmdapi.Config)) []byte {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	for _, c := range contexts {
		kc.Clusters[c] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:6443", CertificateAuthorityData: []byte("not checked here")}
		kc.AuthInfos[c] = &clientcmdapi.AuthInfo{Token: "token-" + c}
		kc.Contexts[c] = &clientcmdapi.Context{Cluster: c, AuthInfo: c}
	}
	kc.CurrentContext = current
	if change != nil {
		change(kc)
	}
	data, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestLoad_UsesTheNamedOrCurrentContext(t *testing.T) {
	data := kubeconfig(t, "a", []string{"a", "b"}, nil)
	for _, tc := range []struct{ context, token string }{{"", "token-a"}, {"b", "token-b"}} {
		cfg, err := Load(data, tc.context, true)
		if err != nil {
			t.Fatalf("Load(context %q): %v", tc.context, err)
		}
		if cfg.BearerToken != tc.token || cfg.Host != "https://127.0.0.1:6443" {
			t.Errorf("Load(context %q) = host %q token %q, want token %q", tc.context, cfg.Host, cfg.BearerToken, tc.token)
		}
	}
}

func TestLoad_SaysWhatToFix(t *testing.T) {
	for _, tc := range []struct {
		name    string
		data    []byte
		context string
		strict  bool
		want    string
	}{
		{"does not parse", []byte("apiVersion: v1\nclusters: [oops"), "", false, "does not parse"},
		{"unknown context", kubeconfig(t, "a", []string{"a", "b"}, nil), "nope", false, `no context "nope": name one of its contexts (it has a, b)`},
		{"no current context", kubeconfig(t, "", []string{"a"}, nil), "", false, "has no current-context"},
		{"context names a missing cluster", kubeconfig(t, "a", []string{"a"}, func(kc *clientcmdapi.Config) { kc.Contexts["a"].Cluster = "gone" }), "", false, `names cluster "gone"`},
		{"exec from a Secret", kubeconfig(t, "a", []string{"a"}, func(kc *clientcmdapi.Config) {
			kc.AuthInfos["a"].Exec = &clientcmdapi.ExecConfig{Command: "sh", APIVersion: "client.authentication.k8s.io/v1"}
		}), "", true, "runs a command (exec)"},
		{"file paths from a Secret", kubeconfig(t, "a", []string{"a"}, func(kc *clientcmdapi.Config) { kc.AuthInfos["a"].TokenFile = "/etc/token" }), "", true, "reads files"},
		{"CA file from a Secret", kubeconfig(t, "a", []string{"a"}, func(kc *clientcmdapi.Config) {
			kc.Clusters["a"].CertificateAuthorityData, kc.Clusters["a"].CertificateAuthority = nil, "/etc/ca.crt"
		}), "", true, "certificate-authority is a file path"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(tc.data, tc.context, tc.strict)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Load: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestFromSecret_NamesTheClusterAfterTheSecretAndReportsBadOnes(t *testing.T) {
	good := kubeconfig(t, "a", []string{"a", "b"}, nil)
	secret := func(name string, data map[string][]byte, context string) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Data: data}
		if context != "" {
			s.Annotations = map[string]string{ContextAnnotation: context}
		}
		return s
	}
	sp := FromSecret(secret("east", map[string][]byte{SecretKey: good}, "b"))
	if sp.Err != nil || sp.Name != "east" || sp.Config.BearerToken != "token-b" || sp.Origin != "Secret ns/east" {
		t.Errorf("FromSecret(east) = %+v, want cluster east at context b", sp)
	}
	capi := FromSecret(secret("west", map[string][]byte{SecretKeyCAPI: good}, ""))
	if capi.Err != nil || capi.Config.BearerToken != "token-a" {
		t.Errorf("FromSecret with Cluster API's key: %+v, want context a", capi)
	}
	if FromSecret(secret("east", map[string][]byte{SecretKey: good}, "a")).Fingerprint == sp.Fingerprint {
		t.Error("another context gives the same fingerprint: a change of context would not join the cluster again")
	}
	for _, tc := range []struct {
		s    *corev1.Secret
		want string
	}{
		{secret("empty", nil, ""), `no data key "kubeconfig"`},
		{secret("ctx", map[string][]byte{SecretKey: good}, "c"), `no context "c"`},
		{secret("Not_A_Name", map[string][]byte{SecretKey: good}, ""), "cannot name a cluster"},
	} {
		if sp := FromSecret(tc.s); sp.Err == nil || !strings.Contains(sp.Err.Error(), tc.want) || sp.Secret != tc.s {
			t.Errorf("FromSecret(%s): err %v, want one containing %q, with the Secret", tc.s.Name, sp.Err, tc.want)
		}
	}
}

func TestReadDir_OneClusterPerFileNamedWithoutExtension(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("east.kubeconfig", kubeconfig(t, "a", []string{"a"}, nil))
	write("west.yaml", kubeconfig(t, "a", []string{"a"}, nil))
	write("broken", []byte("clusters: [oops"))
	write(".hidden", []byte("skipped"))
	if err := os.Mkdir(filepath.Join(dir, "..data"), 0o700); err != nil {
		t.Fatal(err)
	}
	specs, err := ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Spec{}
	for _, sp := range specs {
		got[sp.Name] = sp
	}
	if len(got) != 3 || got["east"].Err != nil || got["west"].Err != nil || got["broken"].Err == nil {
		t.Errorf("ReadDir = %+v, want east and west usable and broken with an error", got)
	}
	if !strings.HasPrefix(got["east"].Origin, "file ") || got["east"].Fingerprint == "" {
		t.Errorf("east: origin %q fingerprint %q", got["east"].Origin, got["east"].Fingerprint)
	}
	if _, err := ReadDir(filepath.Join(dir, "missing")); err == nil {
		t.Error("ReadDir of a missing directory: no error")
	}
}

func TestBackoff_DoublesUpToTheMaximum(t *testing.T) {
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}
	for i, w := range want {
		if got := Backoff(i+1, time.Second, 5*time.Second); got != w {
			t.Errorf("Backoff(%d) = %v, want %v", i+1, got, w)
		}
	}
}

func TestDialer_CloseEndsEveryConnectionAndRefusesNewOnes(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 2)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	var d Dialer
	var conns []net.Conn
	for range 2 {
		c, err := d.Dial(context.Background(), "tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		defer (<-accepted).Close()
	}
	if n := d.Open(); n != 2 {
		t.Fatalf("Open() = %d, want 2", n)
	}
	d.Close()
	if n := d.Open(); n != 0 {
		t.Errorf("Open() after Close = %d, want 0", n)
	}
	if _, err := conns[0].Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Errorf("write on a connection after Close: %v, want net.ErrClosed", err)
	}
	if _, err := d.Dial(context.Background(), "tcp", ln.Addr().String()); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Dial after Close: %v, want net.ErrClosed", err)
	}
}

func TestExplain_NamesACAMismatch(t *testing.T) {
	err := Explain(errors.New(`Get "https://127.0.0.1/version": tls: failed to verify certificate: x509: certificate signed by unknown authority`))
	if !strings.Contains(err.Error(), "certificate-authority-data does not match") {
		t.Errorf("Explain = %v", err)
	}
	unauthorized := apierrors.NewUnauthorized("bad token")
	if err := Explain(unauthorized); !strings.Contains(err.Error(), "refused the kubeconfig's credentials") || !apierrors.IsUnauthorized(err) {
		t.Errorf("Explain(401) = %v, want it explained and still an Unauthorized error", err)
	}
	plain := errors.New("connection refused")
	if Explain(plain) != plain {
		t.Error("Explain changed an error it cannot explain")
	}
}
