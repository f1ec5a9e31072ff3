// Command image builds kloop's container images without a Docker daemon:
// for each command it cross-compiles a static binary (CGO off, -trimpath)
// per platform, lays it on an empty base with CA certificates and
// /etc/passwd, and writes, under -out:
//
//	<command>/                 an OCI image layout holding one image index
//	                           (linux/amd64 and linux/arm64 by default)
//	<command>-<arch>.tar       a `docker load`-able tarball per platform
//
// The images run as user 65532 (nonroot), with the binary as entrypoint
// at /usr/local/bin/<command>, and carry the OCI labels source, revision,
// version and created. Two builds of one commit give one digest: file
// times and the image's creation time are the commit's time, the binary is
// built with -trimpath, and nothing else varies.
//
// The CA certificates are the NSS roots that golang.org/x/crypto/x509roots
// ships as a Go module, pinned in this module's go.mod, rather than the
// build machine's /etc/ssl/certs, so that the bundle (and the digest) do
// not depend on the machine; roots that NSS trusts only with extra
// constraints (a distrust-after date) are left out, since a PEM bundle
// cannot carry them.
//
//	go run . -repo ../.. -out ../../bin/images -commands foo-controller,notifier,podwatch
//
// `make image` runs it. Push with `crane push` or `skopeo copy --all
// oci:bin/images/<command> docker://REGISTRY/<command>:TAG`.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
)

func main() {
	var o Options
	var commands, platforms string
	flag.StringVar(&o.RepoDir, "repo", ".", "root of the kloop repository (the main module)")
	flag.StringVar(&o.OutDir, "out", "bin/images", "where the layouts and tarballs go")
	flag.StringVar(&commands, "commands", "foo-controller,notifier,podwatch", "commands under cmd/ to build, comma-separated")
	flag.StringVar(&platforms, "platforms", "linux/amd64,linux/arm64", "platforms, comma-separated")
	flag.StringVar(&o.Repository, "repository", DefaultRepository, "image name prefix: images are <repository>/<command>:<tag>")
	flag.StringVar(&o.Tag, "tag", DefaultTag, "image tag")
	flag.StringVar(&o.Version, "version", "", "the version label (default: git describe --tags --always --dirty)")
	flag.StringVar(&o.Source, "source", DefaultSource, "the source label")
	flag.Parse()
	o.Commands = strings.Split(commands, ",")
	o.Platforms = strings.Split(platforms, ",")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	res, err := Build(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
	for _, r := range res {
		fmt.Printf("%s %s %s\n", r.Ref, r.Digest, r.Layout)
	}
}
