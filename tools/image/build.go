package main

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// Defaults of Options.
const (
	DefaultRepository = "kloop.local"
	DefaultTag        = "dev"
	DefaultSource     = "https://github.com/kloop-dev/kloop"
	// User is the uid and gid the images run as: distroless's nonroot.
	User = 65532
	// BinDir is where the binary is in the image.
	BinDir = "/usr/local/bin"
	// CAFile is where the CA bundle is in the image (Go's crypto/x509
	// looks there on Linux).
	CAFile = "/etc/ssl/certs/ca-certificates.crt"
)

// Options configures Build.
type Options struct {
	// RepoDir is the root of the main module; Commands are built from
	// RepoDir/cmd/<command>.
	RepoDir  string
	OutDir   string
	Commands []string
	// Platforms are os/arch[/variant], such as linux/amd64.
	Platforms []string
	// Repository, Tag: images are named <Repository>/<command>:<Tag>.
	Repository, Tag string
	// Version, Revision and Source are the OCI labels; Version and
	// Revision default to git describe and the commit of RepoDir.
	Version, Revision, Source string
	// Created is the time of every file and of the image: default the
	// commit's time ($SOURCE_DATE_EPOCH if git cannot tell).
	Created time.Time
}

// Result is one built command.
type Result struct {
	Command string
	Ref     string // <Repository>/<command>:<Tag>
	Digest  v1.Hash
	Layout  string            // the OCI layout's directory
	Tarball map[string]string // docker tarball by platform
}

// Build builds every command for every platform and writes their layouts
// and tarballs into OutDir, replacing earlier ones.
func Build(ctx context.Context, o Options) ([]Result, error) {
	if err := o.defaults(ctx); err != nil {
		return nil, err
	}
	ca, err := caLayer(o.Created)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.OutDir, 0o755); err != nil {
		return nil, err
	}
	bins, err := os.MkdirTemp("", "kloop-image-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(bins)

	var out []Result
	for _, cmd := range o.Commands {
		ref, err := name.NewTag(o.Repository + "/" + cmd + ":" + o.Tag)
		if err != nil {
			return nil, fmt.Errorf("image name for %s: %w", cmd, err)
		}
		r := Result{Command: cmd, Ref: ref.String(), Layout: filepath.Join(o.OutDir, cmd), Tarball: map[string]string{}}
		idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
		for _, p := range o.Platforms {
			plat, err := v1.ParsePlatform(p)
			if err != nil {
				return nil, fmt.Errorf("platform %q: %w", p, err)
			}
			bin := filepath.Join(bins, cmd+"-"+plat.OS+"-"+plat.Architecture)
			if err := o.compile(ctx, cmd, plat, bin); err != nil {
				return nil, err
			}
			img, err := o.image(cmd, plat, bin, ca)
			if err != nil {
				return nil, err
			}
			idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: plat}})
			tb := filepath.Join(o.OutDir, cmd+"-"+plat.Architecture+plat.Variant+".tar")
			if err := tarball.WriteToFile(tb, ref, img); err != nil {
				return nil, fmt.Errorf("write %s: %w", tb, err)
			}
			r.Tarball[p] = tb
		}
		idx = mutate.Annotations(idx, o.labels()).(v1.ImageIndex)
		if r.Digest, err = idx.Digest(); err != nil {
			return nil, err
		}
		if err := os.RemoveAll(r.Layout); err != nil {
			return nil, err
		}
		lp, err := layout.Write(r.Layout, empty.Index)
		if err != nil {
			return nil, fmt.Errorf("write layout %s: %w", r.Layout, err)
		}
		if err := lp.AppendIndex(idx, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": ref.String()})); err != nil {
			return nil, fmt.Errorf("write layout %s: %w", r.Layout, err)
		}
		out = append(out, r)
	}
	return out, nil
}

func (o *Options) defaults(ctx context.Context) error {
	if o.RepoDir == "" {
		o.RepoDir = "."
	}
	if o.OutDir == "" {
		o.OutDir = filepath.Join(o.RepoDir, "bin", "images")
	}
	if o.Repository == "" {
		o.Repository = DefaultRepository
	}
	if o.Tag == "" {
		o.Tag = DefaultTag
	}
	if o.Source == "" {
		o.Source = DefaultSource
	}
	if len(o.Commands) == 0 || len(o.Platforms) == 0 {
		return errors.New("no commands or no platforms to build")
	}
	git := func(args ...string) string {
		c := exec.CommandContext(ctx, "git", args...)
		c.Dir = o.RepoDir
		b, err := c.Output()
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(b))
	}
	if o.Revision == "" {
		o.Revision = git("rev-parse", "HEAD")
	}
	if o.Revision == "" {
		return fmt.Errorf("the commit of %s: git rev-parse HEAD failed; pass the revision", o.RepoDir)
	}
	if o.Version == "" {
		o.Version = git("describe", "--tags", "--always", "--dirty")
	}
	if o.Created.IsZero() {
		sec := git("log", "-1", "--format=%ct")
		if sec == "" {
			sec = os.Getenv("SOURCE_DATE_EPOCH")
		}
		n, err := strconv.ParseInt(sec, 10, 64)
		if err != nil {
			return fmt.Errorf("the commit time of %s (git log, or $SOURCE_DATE_EPOCH): %q", o.RepoDir, sec)
		}
		o.Created = time.Unix(n, 0).UTC()
	}
	return nil
}

func (o *Options) labels() map[string]string {
	return map[string]string{
		"org.opencontainers.image.source":   o.Source,
		"org.opencontainers.image.revision": o.Revision,
		"org.opencontainers.image.version":  o.Version,
		"org.opencontainers.image.created":  o.Created.Format(time.RFC3339),
	}
}

// compile builds cmd/<cmd> for plat into bin: static, without paths of
// this machine, and without Go's VCS stamp (whose modified flag and commit
// time would tie the binary to the state of the work tree): the version
// and revision are linked in instead, and the version subcommand prints
// them.
func (o *Options) compile(ctx context.Context, cmd string, plat *v1.Platform, bin string) error {
	const cli = "github.com/kloop-dev/kloop/cli"
	c := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false",
		"-ldflags=-s -w -X "+cli+".revision="+o.Revision+" -X "+cli+".version="+o.Version,
		"-o", bin, "./cmd/"+cmd)
	c.Dir = o.RepoDir
	c.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+plat.OS, "GOARCH="+plat.Architecture, "GOFLAGS=-mod=readonly")
	if plat.Architecture == "arm" && plat.Variant != "" {
		c.Env = append(c.Env, "GOARM="+strings.TrimPrefix(plat.Variant, "v"))
	}
	var stderr bytes.Buffer
	c.Stderr = &stderr
	if err := c.Run(); err != nil {
		return fmt.Errorf("go build ./cmd/%s for %s: %w\n%s", cmd, plat, err, stderr.String())
	}
	return nil
}

func (o *Options) image(cmd string, plat *v1.Platform, bin string, ca v1.Layer) (v1.Image, error) {
	data, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	entry := path.Join(BinDir, cmd)
	binLayer, err := layerOf(o.Created, []file{{name: entry, mode: 0o755, data: data}})
	if err != nil {
		return nil, err
	}
	hist := func(by string) v1.History { return v1.History{Created: v1.Time{Time: o.Created}, CreatedBy: by} }
	img, err := mutate.Append(mutate.MediaType(empty.Image, types.OCIManifestSchema1),
		mutate.Addendum{Layer: ca, History: hist("kloop image: CA certificates, /etc/passwd and /etc/group"), MediaType: types.OCILayer},
		mutate.Addendum{Layer: binLayer, History: hist("kloop image: go build ./cmd/" + cmd), MediaType: types.OCILayer},
	)
	if err != nil {
		return nil, err
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = plat.OS, plat.Architecture, plat.Variant
	cf.Created = v1.Time{Time: o.Created}
	uid := strconv.Itoa(User)
	cf.Config = v1.Config{
		Entrypoint: []string{entry},
		User:       uid + ":" + uid,
		WorkingDir: "/",
		Env:        []string{"PATH=" + BinDir + ":/usr/bin:/bin", "SSL_CERT_FILE=" + CAFile},
		Labels:     o.labels(),
	}
	return mutate.ConfigFile(img, cf)
}

// caLayer holds the CA bundle and the nonroot user.
func caLayer(created time.Time) (v1.Layer, error) {
	var pemBundle bytes.Buffer
	n := 0
	for r := range bundle.Roots() {
		if r.Constraint != nil {
			continue // a PEM file cannot say "distrusted after"
		}
		if err := pem.Encode(&pemBundle, &pem.Block{Type: "CERTIFICATE", Bytes: r.Certificate}); err != nil {
			return nil, err
		}
		n++
	}
	if n == 0 {
		return nil, errors.New("the CA bundle is empty")
	}
	uid := strconv.Itoa(User)
	return layerOf(created, []file{
		{name: CAFile, mode: 0o644, data: pemBundle.Bytes()},
		{name: "/etc/passwd", mode: 0o644, data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:" + uid + ":" + uid + ":nonroot:/home/nonroot:/sbin/nologin\n")},
		{name: "/etc/group", mode: 0o644, data: []byte("root:x:0:\nnonroot:x:" + uid + ":\n")},
		{name: "/home/nonroot", mode: 0o700 | os.ModeDir, uid: User},
		{name: "/tmp", mode: 0o1777 | os.ModeDir | os.ModeSticky},
	})
}

type file struct {
	name string
	mode os.FileMode
	uid  int
	data []byte
}

// layerOf makes a gzipped tar layer of files and their parent directories,
// every entry owned by root (unless uid says otherwise) and dated created.
func layerOf(created time.Time, files []file) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	seen := map[string]bool{}
	var dirs func(p string) error
	dirs = func(p string) error {
		if p == "/" || p == "." || seen[p] {
			return nil
		}
		if err := dirs(path.Dir(p)); err != nil {
			return err
		}
		seen[p] = true
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(p, "/") + "/", Mode: 0o755, ModTime: created, Format: tar.FormatPAX})
	}
	for _, f := range files {
		if err := dirs(path.Dir(f.name)); err != nil {
			return nil, err
		}
		h := &tar.Header{Name: strings.TrimPrefix(f.name, "/"), Mode: int64(f.mode.Perm()), ModTime: created, Uid: f.uid, Gid: f.uid, Format: tar.FormatPAX}
		if f.mode&os.ModeSticky != 0 {
			h.Mode |= 0o1000
		}
		if f.mode.IsDir() {
			h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"
			seen[f.name] = true
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil },
		tarball.WithMediaType(types.OCILayer))
}
