package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/kloop-dev/kloop/cli"
	"github.com/kloop-dev/kloop/internal/cpbin"
	"github.com/kloop-dev/kloop/testenv"
)

// controlPlaneBinaries are the binaries testenv runs.
var controlPlaneBinaries = []string{"etcd", "kube-apiserver", "kube-controller-manager"}

// stampFile is build.sh's record of what the binaries in a directory were
// built from.
const stampFile = ".controlplane-stamp"

func controlPlaneCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "controlplane",
		Short: "Build or find etcd, kube-apiserver and kube-controller-manager for testenv and kloop dev",
	}
	cmd.AddCommand(installCommand(), controlPlaneDirCommand())
	return cmd
}

// installFlags are kloop controlplane install's flags.
type installFlags struct {
	binDir, from, kloopDir string
}

func installCommand() *cobra.Command {
	f := &installFlags{}
	cmd := &cobra.Command{
		Use:   "install",
		Short: "Build the control-plane binaries into the per-user cache directory (once; later runs return at once)",
		Long: "install builds etcd, kube-apiserver and kube-controller-manager " + testenv.KubernetesVersion + " from the pinned Go modules in\n" +
			"tools/controlplane of the kloop checkout this kloop binary was built from, into the per-user\n" +
			"directory where testenv, kloop dev and projects made by kloop init look for them:\n" +
			"os.UserCacheDir()/kloop/controlplane/" + testenv.KubernetesVersion + " (~/.cache/kloop/... on Linux). The first build\n" +
			"takes a while (about 15 minutes on 2 cores); after that it returns at once, and a changed pin\n" +
			"or Go version rebuilds from the Go build cache. It prints the directory on stdout.\n\n" +
			"--from copies binaries built elsewhere (a checkout's bin/) instead of building.\n" +
			"$" + testenv.BinDirEnv + " (or --bin-dir of kloop dev) still overrides where they are looked up.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir, err := f.install(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), dir)
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.binDir, "bin-dir", "", "install into this `dir` instead of the per-user cache directory")
	fs.StringVar(&f.from, "from", "", "copy etcd, kube-apiserver and kube-controller-manager from this `dir` instead of building them")
	fs.StringVar(&f.kloopDir, "kloop-dir", "", "build from the kloop checkout at this `dir` (default: the one this kloop binary was built from)")
	return cmd
}

func controlPlaneDirCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "dir",
		Short: "Print the directory testenv and kloop dev take the control-plane binaries from",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir, err := cpbin.Dir()
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), dir)
			return nil
		},
	}
}

// install puts the binaries in place and returns their directory.
func (f *installFlags) install(log io.Writer) (string, error) {
	dir := f.binDir
	if dir == "" {
		var err error
		if dir, err = cpbin.UserDir(); err != nil {
			return "", err
		}
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if f.from != "" {
		if f.kloopDir != "" {
			return "", cli.Usagef("--from copies binaries and --kloop-dir builds them: give one of them")
		}
		return dir, copyBinaries(f.from, dir, log)
	}
	src, err := findCheckout(f.kloopDir)
	if err != nil {
		return "", err
	}
	script := filepath.Join(src.Dir, "tools", "controlplane", "build.sh")
	if _, err := os.Stat(script); err != nil {
		return "", fmt.Errorf("%s is missing (the module cache's copy of kloop has no tools/controlplane): pass --kloop-dir with the root of a kloop checkout", script)
	}
	build := exec.Command("bash", script, dir)
	build.Stdout, build.Stderr = log, log
	if err := build.Run(); err != nil {
		return "", fmt.Errorf("building the control plane with %s: %w (its output is above)", script, err)
	}
	return dir, nil
}

// copyBinaries copies the control-plane binaries (and build.sh's stamp,
// when there is one) from one directory to another, each through a
// temporary file renamed into place.
func copyBinaries(from, to string, log io.Writer) error {
	for _, b := range controlPlaneBinaries {
		if st, err := os.Stat(filepath.Join(from, b)); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			return &cli.FlagError{Flag: "--from", Value: from, Want: fmt.Sprintf("a directory holding the executables %s; %s is not there", "etcd, kube-apiserver and kube-controller-manager", b)}
		}
	}
	if err := os.MkdirAll(to, 0o755); err != nil {
		return err
	}
	for _, b := range append(controlPlaneBinaries, stampFile) {
		err := copyFile(filepath.Join(from, b), filepath.Join(to, b))
		if b == stampFile && errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
	}
	fmt.Fprintf(log, "controlplane: copied etcd, kube-apiserver and kube-controller-manager from %s to %s\n", from, to)
	return nil
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(to), "."+filepath.Base(to)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, in); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(st.Mode().Perm()); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), to)
}
