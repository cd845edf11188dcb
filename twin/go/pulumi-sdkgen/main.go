// pulumi-sdkgen writes a Pulumi package's Python or Node.js SDK from its schema with the code
// generators of pulumi pkg/v3 (codegen/python, codegen/nodejs), called the way the Python and
// Node.js language hosts call them in their GeneratePackage RPC (pulumi/pulumi
// sdk/python/cmd/pulumi-language-python/main.go: BindSpec with AllowDanglingReferences, then
// GeneratePackage with the tool name "pulumi-language-<language>"). `pulumi package gen-sdk` runs
// exactly that through the language host, which the Go module proxy does not serve; this binary
// is the twin's way to run the same generator (docs/verification-engine.md).
//
//	pulumi-sdkgen SCHEMA.json python|nodejs OUT_DIR
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/blang/semver"
	"github.com/pulumi/pulumi/pkg/v3/codegen/nodejs"
	"github.com/pulumi/pulumi/pkg/v3/codegen/python"
	"github.com/pulumi/pulumi/pkg/v3/codegen/schema"
)

// noReferences refuses every package reference: our schema refers to no other package, and a
// reference would need that package's provider, which this tool does not start.
type noReferences struct{}

func (noReferences) refused(name string) error {
	return fmt.Errorf("schema refers to package %q; pulumi-sdkgen loads no other packages", name)
}

func (l noReferences) LoadPackage(pkg string, _ *semver.Version) (*schema.Package, error) {
	return nil, l.refused(pkg)
}

func (l noReferences) LoadPackageV2(_ context.Context, d *schema.PackageDescriptor) (*schema.Package, error) {
	return nil, l.refused(d.Name)
}

func (l noReferences) LoadPackageReference(pkg string, _ *semver.Version) (schema.PackageReference, error) {
	return nil, l.refused(pkg)
}

func (l noReferences) LoadPackageReferenceV2(
	_ context.Context, d *schema.PackageDescriptor,
) (schema.PackageReference, error) {
	return nil, l.refused(d.Name)
}

func generate(schemaPath, language, out string) error {
	data, err := os.ReadFile(schemaPath)
	if err != nil {
		return err
	}
	var spec schema.PackageSpec
	if err := json.Unmarshal(data, &spec); err != nil {
		return fmt.Errorf("%s: %w", schemaPath, err)
	}
	loader := noReferences{}
	pkg, diags, err := schema.BindSpec(spec, loader, schema.ValidationOptions{AllowDanglingReferences: true})
	if err != nil {
		return err
	}
	if diags.HasErrors() {
		return fmt.Errorf("%s does not bind: %s", schemaPath, diags.Error())
	}
	var files map[string][]byte
	tool := "pulumi-language-" + language
	switch language {
	case "python":
		files, err = python.GeneratePackage(tool, pkg, nil, loader)
	case "nodejs":
		files, err = nodejs.GeneratePackage(tool, pkg, nil, nil, false, loader)
	default:
		return fmt.Errorf("language %q: python or nodejs", language)
	}
	if err != nil {
		return err
	}
	for name, content := range files {
		path := filepath.Join(out, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, content, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: pulumi-sdkgen SCHEMA.json python|nodejs OUT_DIR")
		os.Exit(2)
	}
	if err := generate(os.Args[1], os.Args[2], os.Args[3]); err != nil {
		fmt.Fprintln(os.Stderr, "pulumi-sdkgen:", err)
		os.Exit(1)
	}
}
