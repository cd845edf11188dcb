#!/usr/bin/env bash
# Build the real Pulumi engine pieces of the twin from the Go module proxy,
# only those missing from the cache:
#   pulumi                      github.com/pulumi/pulumi/pkg/v3 cmd/pulumi      (twin/go/pulumi)
#   pulumi-resource-kubernetes  github.com/pulumi/pulumi-kubernetes/provider/v4 (twin/go/pulumi-resource-kubernetes)
#   pulumi-language-yaml        github.com/pulumi/pulumi-yaml cmd/pulumi-language-yaml (twin/go/pulumi-yaml)
#   pulumi-sdkgen               ours: pkg/v3's Python and Node.js SDK generators (twin/go/pulumi-sdkgen),
#                               what `pulumi package gen-sdk` runs through the missing language hosts
#   pulumi-language-python      github.com/pulumi/pulumi/sdk/python/cmd/pulumi-language-python/v3
#                               (tried; the proxy does not serve it, see below)
# Binaries land in ${DEEPSEEK_EKS_TWIN_CACHE:-$HOME/.cache/deepseek-eks/twin}/<name>-<version>/<name>,
# the cache layout twin/build.sh uses for etcd and kube-apiserver. Never downloads a binary.
#
#   twin/build-engine.sh          build what is missing, print each binary's path
#   twin/build-engine.sh --check  build nothing; exit 3 if a buildable binary is missing
#
# Exit: 0 all buildable binaries present, 1 a build failed, 3 (--check) something is missing.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${DEEPSEEK_EKS_TWIN_CACHE:-$HOME/.cache/deepseek-eks/twin}
GO=${GO:-go}
export GOTOOLCHAIN=local # never download a Go toolchain
export GOFLAGS="${GOFLAGS:--buildvcs=false} -mod=mod"
CHECK_ONLY=0
[[ ${1:-} == --check ]] && CHECK_ONLY=1

# The proxy serves no pkg/v3 v3.272.0 (the Python SDK pin in requirements.txt); v3.274.0 is the
# first pkg tag after it. The CLI talks to SDKs over gRPC, so a newer CLI than the SDK is supported.
PULUMI_VERSION=v3.274.0
# The only provider/v4 version the proxy serves (a 2026-01-15 commit); no v4.34.2 tag is served.
K8S_MODULE=github.com/pulumi/pulumi-kubernetes/provider/v4
K8S_VERSION=v4.0.0-20260115033456-f47bc2d6f199
# The YAML language host: its own module, tagged and served (v1.25.0, 2026-12-01 list).
YAML_VERSION=v1.25.0
LANGHOST_MODULE=github.com/pulumi/pulumi/sdk/python/cmd/pulumi-language-python/v3

failed=0
missing=0

# build NAME VERSION WRAPPER_DIR PACKAGE LDFLAGS: go build PACKAGE in WRAPPER_DIR into the cache.
build() {
	local name=$1 version=$2 dir=$3 package=$4 ldflags=$5
	local out="$CACHE/$name-$version/$name"
	if [[ -x $out ]]; then
		echo "$name: $out (cached)"
		return
	fi
	if ((CHECK_ONLY)); then
		echo "$name: missing ($out); build it with twin/build-engine.sh" >&2
		missing=1
		return
	fi
	mkdir -p "$(dirname "$out")"
	local log="$CACHE/$name-$version/build.log" start=$SECONDS
	echo "$name: building $package at $version (log: $log)"
	if (cd "$dir" && nice -n 10 "$GO" build -trimpath -ldflags "$ldflags" -o "$out.tmp.$$" "$package") >"$log" 2>&1; then
		mv "$out.tmp.$$" "$out" # atomic: a half-written binary is never taken as cached
		echo "$name: built in $((SECONDS - start))s: $out" | tee -a "$log"
		echo "$(date -u +%FT%TZ) built $name $version in $((SECONDS - start))s" >>"$CACHE/build-times.log"
	else
		rm -f "$out.tmp.$$"
		echo "$name: build FAILED after $((SECONDS - start))s; command: (cd $dir && $GO build -trimpath -ldflags '$ldflags' -o $out $package)" >&2
		tail -20 "$log" >&2
		failed=1
	fi
}

build pulumi "$PULUMI_VERSION" "$ROOT/twin/go/pulumi" github.com/pulumi/pulumi/pkg/v3/cmd/pulumi \
	"-s -w -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=$PULUMI_VERSION"

# The provider's own main embeds generated files its zip lacks; ours embeds the schema it ships.
k8s_dir="$ROOT/twin/go/pulumi-resource-kubernetes"
if [[ ! -x "$CACHE/pulumi-resource-kubernetes-$K8S_VERSION/pulumi-resource-kubernetes" ]] && ((!CHECK_ONLY)); then
	module_dir=$(cd "$k8s_dir" && "$GO" mod download -json "$K8S_MODULE@$K8S_VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
	for file in schema.json terraform-mapping.json; do
		install -m 0644 "$module_dir/cmd/pulumi-resource-kubernetes/$file" "$k8s_dir/$file"
	done
fi
build pulumi-resource-kubernetes "$K8S_VERSION" "$k8s_dir" . \
	"-s -w -X github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version.Version=${K8S_VERSION#v}"

build pulumi-language-yaml "$YAML_VERSION" "$ROOT/twin/go/pulumi-yaml" github.com/pulumi/pulumi-yaml/cmd/pulumi-language-yaml \
	"-s -w -X github.com/pulumi/pulumi-yaml/pkg/version.Version=$YAML_VERSION"

# Same pkg/v3 as the CLI: the SDK generators `pulumi package gen-sdk` would reach through the hosts.
build pulumi-sdkgen "$PULUMI_VERSION" "$ROOT/twin/go/pulumi-sdkgen" . "-s -w"

# The Python language host is its own module with no tags; the proxy answers 403 for it (its
# version list and any pseudo-version). Without it, Python programs run through the real engine
# as Automation API inline programs (the SDK's own language server, `pulumi ... --client`).
if ! ((CHECK_ONLY)); then
	if (cd "$ROOT/twin/go/pulumi" && "$GO" list -m -versions "$LANGHOST_MODULE@latest") >/dev/null 2>&1; then
		echo "pulumi-language-python: now served by the proxy; add a wrapper module for it" >&2
	else
		echo "pulumi-language-python: not served by the proxy ($GO list -m $LANGHOST_MODULE@latest fails); skipped"
	fi
fi

((failed)) && exit 1
((missing)) && exit 3
exit 0
