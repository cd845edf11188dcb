// Command etcd is the upstream etcd server (go.etcd.io/etcd/server/v3), built
// from the module proxy: the etcd repository's own main module replaces its
// sibling modules with relative paths, so it cannot be `go install`ed; this
// wrapper calls the same entry point.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
