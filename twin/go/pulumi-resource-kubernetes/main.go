// Command pulumi-resource-kubernetes serves the Kubernetes provider of
// github.com/pulumi/pulumi-kubernetes/provider/v4 with the schema its module ships.
package main

import (
	_ "embed"

	"github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/provider"
	"github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version"
)

// Copied from the module's cmd/pulumi-resource-kubernetes/ by twin/build-engine.sh (git-ignored).
//
//go:embed schema.json
var schema []byte

//go:embed terraform-mapping.json
var terraformMapping []byte

func main() {
	provider.Serve("kubernetes", version.Version, schema, terraformMapping)
}
