package testenv

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// KubernetesVersion is the release of kube-apiserver and
// kube-controller-manager that kloop's control plane is built from
// (tools/controlplane/go.mod's k8s.io/kubernetes; a test keeps the two
// equal). It names the directory of UserBinDir, so that binaries of
// another release are never picked up by mistake.
const KubernetesVersion = "v1.37.2"

// InstallCommand is what builds or finds the control-plane binaries in
// UserBinDir; errors about a missing binary tell to run it.
const InstallCommand = "kloop controlplane install"

// ErrBinaryMissing is returned when a control-plane binary is not where
// testenv looks for it.
var ErrBinaryMissing = errors.New("control-plane binary missing")

// UserBinDir is the per-user directory of the control-plane binaries,
// os.UserCacheDir()/kloop/controlplane/KubernetesVersion
// ($XDG_CACHE_HOME/kloop/... or ~/.cache/kloop/... on Linux). It is
// outside any repository, so the tests of a project of one's own find the
// binaries there without a flag or environment variable. `kloop
// controlplane install` (or `make controlplane` in kloop's repository)
// fills it.
func UserBinDir() (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("testenv: no per-user cache directory for the control-plane binaries (%w); set %s to a directory holding them", err, BinDirEnv)
	}
	return filepath.Join(base, "kloop", "controlplane", KubernetesVersion), nil
}

// BinDir returns the directory Start takes the binaries from when
// Options.BinDir is empty: $KLOOP_CONTROLPLANE_BIN when set, else
// UserBinDir when it holds etcd, else bin/ at the root of the kloop
// checkout above the working directory when that holds etcd (the layout
// before UserBinDir), else UserBinDir, whose missing binaries Start then
// reports with the command that installs them.
func BinDir() (string, error) {
	if d := os.Getenv(BinDirEnv); d != "" {
		return d, nil
	}
	user, userErr := UserBinDir()
	if userErr == nil && isExecutable(filepath.Join(user, "etcd")) {
		return user, nil
	}
	if repo, ok := repoBinDir(); ok && isExecutable(filepath.Join(repo, "etcd")) {
		return repo, nil
	}
	return user, userErr
}

// repoBinDir finds the kloop repository root by walking up from the
// working directory to the go.mod of github.com/kloop-dev/kloop, and
// returns its bin/ directory.
func repoBinDir() (string, bool) {
	wd, err := os.Getwd()
	if err != nil {
		return "", false
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(data, []byte("module github.com/kloop-dev/kloop\n")) {
			return filepath.Join(dir, "bin"), true
		}
		if parent := filepath.Dir(dir); parent == dir {
			return "", false
		}
	}
}

func isExecutable(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

// findBinary returns the path of the binary name in dir, or an error that
// says how to put it there.
func findBinary(dir, name string) (string, error) {
	p := filepath.Join(dir, name)
	if !isExecutable(p) {
		return "", fmt.Errorf("testenv: %s not found in %s: run `%s` (in kloop's repository: make controlplane), or set %s to a directory holding etcd, kube-apiserver and kube-controller-manager: %w",
			name, dir, InstallCommand, BinDirEnv, ErrBinaryMissing)
	}
	return p, nil
}
