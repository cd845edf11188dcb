// Command kube-apiserver is the upstream kube-apiserver main package, restated
// here because k8s.io/kubernetes replaces its staging modules with ./staging, so
// `go install k8s.io/kubernetes/cmd/kube-apiserver@v` is refused; this module's
// go.mod pins those modules to their released versions instead.
package main

import (
	"os"
	_ "time/tzdata" // CronJob time zones, as upstream

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
