package main

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// build builds foo-controller for both platforms into a new directory, as
// of commit head (pinned, so that a commit made meanwhile does not count).
func build(t *testing.T, head string) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	res, err := Build(ctx, Options{
		RepoDir: "../..", OutDir: t.TempDir(), Commands: []string{"foo-controller"},
		Platforms: []string{"linux/amd64", "linux/arm64"}, Revision: head,
	})
	if err != nil {
		t.Fatalf("Build (bounded by 15 minutes): %v", err)
	}
	if len(res) != 1 {
		t.Fatalf("%d results, want 1", len(res))
	}
	return res[0]
}

func gitHead(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("git", "-C", "../..", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

// files reads every regular file of an image's flattened file system.
func files(t *testing.T, img v1.Image) map[string]*tar.Header {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*tar.Header{}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			out["/"+strings.TrimSuffix(h.Name, "/")] = h
		}
		rc.Close()
	}
	return out
}

func readFile(t *testing.T, img v1.Image, path string) []byte {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if "/"+h.Name == path {
				b, err := io.ReadAll(tr)
				rc.Close()
				if err != nil {
					t.Fatal(err)
				}
				return b
			}
		}
		rc.Close()
	}
	t.Fatalf("%s is in no layer", path)
	return nil
}

func TestBuild_WritesAMultiArchLayoutOfStaticNonRootImagesThatRunVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("cross-compiles foo-controller for two platforms")
	}
	head := gitHead(t)
	r := build(t, head)

	p, err := layout.FromPath(r.Layout)
	if err != nil {
		t.Fatalf("not an OCI layout: %v", err)
	}
	top, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	topm, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(topm.Manifests) != 1 || topm.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != "kloop.local/foo-controller:dev" {
		t.Fatalf("index.json: %+v, want one index named kloop.local/foo-controller:dev", topm.Manifests)
	}
	idx, err := top.ImageIndex(topm.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := idx.Digest(); d != r.Digest {
		t.Errorf("layout holds %s, Build said %s", d, r.Digest)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if im.MediaType != types.OCIImageIndex || im.Annotations["org.opencontainers.image.revision"] != head {
		t.Errorf("index: media type %s, annotations %v; want an OCI index with the revision %s", im.MediaType, im.Annotations, head)
	}
	var plats []string
	for _, desc := range im.Manifests {
		plats = append(plats, desc.Platform.String())
		img, err := idx.Image(desc.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		entry := "/usr/local/bin/foo-controller"
		if !slices.Equal(cf.Config.Entrypoint, []string{entry}) || cf.Config.User != "65532:65532" ||
			cf.OS != desc.Platform.OS || cf.Architecture != desc.Platform.Architecture {
			t.Errorf("%s: entrypoint %q user %q os/arch %s/%s", desc.Platform, cf.Config.Entrypoint, cf.Config.User, cf.OS, cf.Architecture)
		}
		for k, want := range map[string]string{
			"org.opencontainers.image.source":   DefaultSource,
			"org.opencontainers.image.revision": head,
		} {
			if got := cf.Config.Labels[k]; got != want {
				t.Errorf("%s: label %s=%q, want %q", desc.Platform, k, got, want)
			}
		}
		if cf.Config.Labels["org.opencontainers.image.version"] == "" {
			t.Errorf("%s: no version label", desc.Platform)
		}
		fs := files(t, img)
		h, ok := fs[entry]
		if !ok || h.Typeflag != tar.TypeReg || h.Mode&0o111 == 0 || h.Uid != 0 {
			t.Errorf("%s: entrypoint %s in the layers: %+v; want an executable file owned by root", desc.Platform, entry, h)
		}
		// Only the binary, the CA bundle, passwd, group and their
		// directories: an empty base.
		for p, h := range fs {
			if h.Typeflag == tar.TypeReg && !slices.Contains([]string{entry, CAFile, "/etc/passwd", "/etc/group"}, p) {
				t.Errorf("%s: unexpected file %s", desc.Platform, p)
			}
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(readFile(t, img, CAFile)) || len(pool.Subjects()) < 50 {
			t.Errorf("%s: %s holds %d certificates, want the NSS roots", desc.Platform, CAFile, len(pool.Subjects()))
		}
		if !strings.Contains(string(readFile(t, img, "/etc/passwd")), ":65532:65532:") {
			t.Errorf("%s: /etc/passwd has no user 65532", desc.Platform)
		}

		if desc.Platform.Architecture == runtime.GOARCH {
			bin := filepath.Join(t.TempDir(), "foo-controller")
			if err := os.WriteFile(bin, readFile(t, img, entry), 0o755); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(bin, "version").CombinedOutput()
			if err != nil || !strings.Contains(string(out), head) {
				t.Errorf("the binary from the layer: `version` said %q (%v); want the commit %s", out, err, head)
			}
			if file, _ := exec.Command("file", bin).Output(); len(file) > 0 && !bytes.Contains(file, []byte("statically linked")) {
				t.Errorf("the binary is not static: %s", file)
			}
		}

		// The docker tarball holds the same image under the tag.
		tb := r.Tarball[desc.Platform.String()]
		tag, _ := name.NewTag("kloop.local/foo-controller:dev")
		timg, err := tarball.ImageFromPath(tb, &tag)
		if err != nil {
			t.Fatalf("%s: docker tarball %s: %v", desc.Platform, tb, err)
		}
		// docker's format has manifests of its own: the config (the
		// image ID) and the layers are what must agree.
		if a, b := configName(t, timg), configName(t, img); a != b {
			t.Errorf("%s: tarball image ID %s, layout image ID %s", desc.Platform, a, b)
		}
	}
	slices.Sort(plats)
	if !slices.Equal(plats, []string{"linux/amd64", "linux/arm64"}) {
		t.Errorf("platforms %v, want linux/amd64 and linux/arm64", plats)
	}

	again := build(t, head)
	if again.Digest != r.Digest {
		t.Errorf("two builds of one commit: %s, then %s", r.Digest, again.Digest)
	}
}

func configName(t *testing.T, img v1.Image) v1.Hash {
	t.Helper()
	d, err := img.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	return d
}
