package testenv

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/kloop-dev/kloop/internal/cpbin"
)

// KubernetesVersion is the release of kube-apiserver and
// kube-controller-manager that kloop's control plane is built from
// (tools/controlplane/go.mod's k8s.io/kubernetes). It names the per-user
// directory of the binaries, so that binaries of another release are never
// picked up by mistake.
const KubernetesVersion = cpbin.KubernetesVersion

// InstallCommand is what builds or finds the control-plane binaries in
// the per-user directory; errors about a missing binary tell to run it.
const InstallCommand = "kloop controlplane install"

// ErrBinaryMissing is returned when a control-plane binary is not where
// testenv looks for it.
var ErrBinaryMissing = errors.New("control-plane binary missing")

// findBinary returns the path of the binary name in dir, or an error that
// says how to put it there.
func findBinary(dir, name string) (string, error) {
	p := filepath.Join(dir, name)
	if !cpbin.IsExecutable(p) {
		return "", fmt.Errorf("testenv: %s not found in %s: run `%s` (in kloop's repository: make controlplane), or set %s to a directory holding etcd, kube-apiserver and kube-controller-manager: %w",
			name, dir, InstallCommand, BinDirEnv, ErrBinaryMissing)
	}
	return p, nil
}
