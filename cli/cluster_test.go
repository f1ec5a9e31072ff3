package cli_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"

	"github.com/kloop-dev/kloop/cli"
)

// writeKubeconfig writes a kubeconfig whose current context "main" points at
// server, and whose context "other" points at server + "/other".
func writeKubeconfig(t *testing.T, path, server string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	data := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: main
  cluster: {server: %q}
- name: other
  cluster: {server: %q}
users:
- name: u
  user: {token: t}
contexts:
- name: main
  context: {cluster: main, user: u}
- name: other
  context: {cluster: other, user: u}
current-context: main
`, server, server+"/other")
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

// restConfig parses args into NewCluster's flags and loads the config.
func restConfig(args ...string) (*rest.Config, error) {
	c := cli.NewCluster()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	c.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	return c.RESTConfig()
}

func TestCluster_LoadsFlagThenKUBECONFIGThenHomeKubeconfig(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("KUBERNETES_SERVICE_HOST", "") // not in a cluster
	homeCfg := filepath.Join(home, ".kube", "config")
	envCfg := filepath.Join(t.TempDir(), "env")
	flagCfg := filepath.Join(t.TempDir(), "flag")
	writeKubeconfig(t, homeCfg, "https://home.invalid:6443")
	writeKubeconfig(t, envCfg, "https://env.invalid:6443")
	writeKubeconfig(t, flagCfg, "https://flag.invalid:6443")

	for _, tc := range []struct {
		name       string
		kubeconfig string // $KUBECONFIG; "" unsets it
		args       []string
		wantHost   string
	}{
		{"the flag wins over $KUBECONFIG and ~/.kube/config", envCfg, []string{"--kubeconfig", flagCfg}, "https://flag.invalid:6443"},
		{"$KUBECONFIG wins over ~/.kube/config", envCfg, nil, "https://env.invalid:6443"},
		{"~/.kube/config last", "", nil, "https://home.invalid:6443"},
		{"--context picks another context", "", []string{"--context", "other"}, "https://home.invalid:6443/other"},
		{"--master overrides the server", envCfg, []string{"--master", "https://master.invalid:1234"}, "https://master.invalid:1234"},
		{"$KUBECONFIG may list files; a missing one is skipped", "/nonexistent" + string(os.PathListSeparator) + envCfg, nil, "https://env.invalid:6443"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("KUBECONFIG", tc.kubeconfig)
			cfg, err := restConfig(tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Host != tc.wantHost {
				t.Errorf("host %q, want %q", cfg.Host, tc.wantHost)
			}
			if cfg.QPS != -1 || cfg.Burst != 30 {
				t.Errorf("QPS %v burst %d, want the defaults -1 and 30", cfg.QPS, cfg.Burst)
			}
		})
	}
}

func TestCluster_AppliesQPSAndBurst(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config")
	writeKubeconfig(t, path, "https://x.invalid")
	cfg, err := restConfig("--kubeconfig", path, "--kube-api-qps", "20", "--kube-api-burst", "40")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.QPS != 20 || cfg.Burst != 40 {
		t.Errorf("QPS %v burst %d, want 20 and 40", cfg.QPS, cfg.Burst)
	}
}

func TestCluster_ErrorsSayWhatToFix(t *testing.T) {
	t.Setenv("HOME", t.TempDir()) // no ~/.kube/config
	t.Setenv("KUBECONFIG", "")
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	path := filepath.Join(t.TempDir(), "config")
	writeKubeconfig(t, path, "https://x.invalid")
	for _, tc := range []struct {
		args      []string
		want      string
		flagError bool
	}{
		{[]string{"--kubeconfig", "/nonexistent/kubeconfig"}, `--kubeconfig "/nonexistent/kubeconfig": no such file or directory; give the path of a kubeconfig file`, true},
		{[]string{"--kubeconfig", path, "--context", "nope"}, `--context "nope": no such context in the kubeconfig`, true},
		{nil, "no API server configured: give --kubeconfig or --master, set $KUBECONFIG, write ~/.kube/config, or run in a cluster", false},
	} {
		_, err := restConfig(tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.args, err, tc.want)
			continue
		}
		if cli.IsUsage(err) != tc.flagError {
			t.Errorf("%q: IsUsage = %v, want %v", tc.args, cli.IsUsage(err), tc.flagError)
		}
	}
}
