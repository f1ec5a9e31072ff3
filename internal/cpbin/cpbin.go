// Package cpbin knows where the control-plane binaries (etcd,
// kube-apiserver, kube-controller-manager) are: the per-user directory that
// `kloop controlplane install` fills and the order testenv looks in.
package cpbin

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
)

// Env names the environment variable that overrides where the
// control-plane binaries are looked up (testenv.BinDirEnv).
const Env = "KLOOP_CONTROLPLANE_BIN"

// KubernetesVersion is the release the binaries are built from
// (testenv.KubernetesVersion); it names UserDir.
const KubernetesVersion = "v1.37.2"

// UserDir is the per-user directory of the control-plane binaries,
// os.UserCacheDir()/kloop/controlplane/KubernetesVersion
// ($XDG_CACHE_HOME/kloop/... or ~/.cache/kloop/... on Linux). It is
// outside any repository, so the tests of a project of one's own find the
// binaries there without a flag or environment variable. `kloop
// controlplane install` (or `make controlplane` in kloop's repository)
// fills it.
func UserDir() (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no per-user cache directory for the control-plane binaries (%w); set %s to a directory holding them", err, Env)
	}
	return filepath.Join(base, "kloop", "controlplane", KubernetesVersion), nil
}

// Dir returns the directory testenv.Start takes the binaries from when
// its Options.BinDir is empty: $KLOOP_CONTROLPLANE_BIN when set, else
// UserDir when it holds etcd, else bin/ at the root of the kloop
// checkout above the working directory when that holds etcd (the layout
// before UserDir), else UserDir, whose missing binaries testenv.Start then
// reports with the command that installs them.
func Dir() (string, error) {
	if d := os.Getenv(Env); d != "" {
		return d, nil
	}
	user, userErr := UserDir()
	if userErr == nil && IsExecutable(filepath.Join(user, "etcd")) {
		return user, nil
	}
	if repo, ok := repoBinDir(); ok && IsExecutable(filepath.Join(repo, "etcd")) {
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

// IsExecutable reports whether path is an executable file.
func IsExecutable(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}
