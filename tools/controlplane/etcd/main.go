// Command etcd is the upstream etcd server, built from the pinned
// go.etcd.io/etcd/server/v3 module for kloop's local control plane. It lives
// in a module of its own so its dependency pins never move the Kubernetes ones.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
