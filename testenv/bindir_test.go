package testenv_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kloop-dev/kloop/testenv"
)

// fakeBin puts an executable etcd in dir.
func fakeBin(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "etcd"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
}

func TestBinDir_LooksInTheOverrideThenTheUserCacheThenTheCheckout(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	t.Setenv(testenv.BinDirEnv, "")
	user := filepath.Join(cache, "kloop", "controlplane", testenv.KubernetesVersion)
	if got, err := testenv.UserBinDir(); err != nil || got != user {
		t.Fatalf("UserBinDir() = %q, %v; want %q", got, err, user)
	}

	// A kloop checkout with bin/etcd, and the working directory below it.
	repo := t.TempDir()
	if err := os.WriteFile(filepath.Join(repo, "go.mod"), []byte("module github.com/kloop-dev/kloop\n\ngo 1.26.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fakeBin(t, filepath.Join(repo, "bin"))
	sub := filepath.Join(repo, "samples", "foo")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(sub)

	check := func(step, want string) {
		t.Helper()
		if got, err := testenv.BinDir(); err != nil || got != want {
			t.Errorf("%s: BinDir() = %q, %v; want %q", step, got, err, want)
		}
	}
	check("only the checkout has binaries", filepath.Join(repo, "bin"))
	fakeBin(t, user)
	check("the user cache has binaries too", user)
	t.Setenv(testenv.BinDirEnv, "/elsewhere")
	check("the environment variable is set", "/elsewhere")

	// Outside any checkout, with nothing installed: the user cache dir,
	// whose missing binaries Start reports with the install command.
	t.Setenv(testenv.BinDirEnv, "")
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Chdir(t.TempDir())
	dir, err := testenv.BinDir()
	if err != nil || !strings.HasSuffix(dir, filepath.Join("kloop", "controlplane", testenv.KubernetesVersion)) {
		t.Fatalf("BinDir() with nothing installed = %q, %v; want the user cache dir", dir, err)
	}
	_, err = testenv.Start(t.Context(), testenv.Options{})
	if !errors.Is(err, testenv.ErrBinaryMissing) || !strings.Contains(err.Error(), "`kloop controlplane install`") || !strings.Contains(err.Error(), dir) {
		t.Errorf("Start with nothing installed: %v; want ErrBinaryMissing naming %s and kloop controlplane install", err, dir)
	}
}
