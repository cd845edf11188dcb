#!/usr/bin/env bash
# Build the twin's real Kubernetes programs from the Go module proxy, only those
# missing from the cache. Usage: twin/build.sh [NAME...]
#   NAME: etcd kube-apiserver (default) kube-controller-manager kube-scheduler kwok karpenter-kwok
#         prometheus-adapter network-policy-controller keda-operator keda-metrics-apiserver
#         (the autoscaling loop) lws coredns (the 671B path's controller, cluster DNS) prometheus promtool (the chart's Prometheus: the loop, the PromQL tests)
# Binaries land in ${DEEPSEEK_EKS_TWIN_CACHE:-$HOME/.cache/deepseek-eks/twin}/<name>-<version>/<name>,
# outside the work tree, so a machine builds each version once. Versions come
# from the wrapper modules' go.mod files (twin/go/*/go.mod), the one place they are pinned.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cache="${DEEPSEEK_EKS_TWIN_CACHE:-$HOME/.cache/deepseek-eks/twin}"
export GOTOOLCHAIN=local   # never download a Go toolchain
export GOFLAGS="${GOFLAGS:--buildvcs=false} -mod=mod -trimpath"
export CGO_ENABLED=0

command -v go >/dev/null || { echo "twin/build.sh: no Go toolchain on PATH (need Go >= 1.26)" >&2; exit 3; }

# The version a wrapper requires: `go mod edit -json` reads go.mod as Go does
# (single line or block require), without building anything.
required_version() {
  (cd "$1" && go mod edit -json) | python3 -c '
import json, sys
mod = sys.argv[1]
print(next(r["Version"] for r in json.load(sys.stdin)["Require"] if r["Path"] == mod))' "$2"
}
kube_version="$(required_version "$here/go/kubernetes" k8s.io/kubernetes)"
etcd_version="$(required_version "$here/go/etcd" go.etcd.io/etcd/server/v3)"
kwok_version="$(required_version "$here/go/kwok" sigs.k8s.io/kwok)"
karpenter_version="$(required_version "$here/go/karpenter" sigs.k8s.io/karpenter)"
adapter_version="$(required_version "$here/go/prometheus-adapter" sigs.k8s.io/prometheus-adapter)"
npc_version="$(required_version "$here/go/network-policy-controller" github.com/aws/amazon-network-policy-controller-k8s)"
keda_version="$(required_version "$here/go/keda" github.com/kedacore/keda/v2)"
lws_version="$(required_version "$here/go/lws" sigs.k8s.io/lws)"
coredns_version="$(required_version "$here/go/coredns" github.com/coredns/coredns)"
prometheus_version="$(required_version "$here/go/prometheus" github.com/prometheus/prometheus)"

prometheus_ldflags() {
  # Prometheus 3 is released as Go module v0.<major><minor>.<patch> (v0.314.0 is v3.14.0); its
  # Makefile (promu) stamps github.com/prometheus/common/version with the release, which
  # `prometheus --version` and the build_info metric report.
  local mm="${prometheus_version#v0.}" patch
  patch="${mm#*.}"; mm="${mm%%.*}"
  local release="${mm:0:1}.${mm:1}.${patch}" pkg=github.com/prometheus/common/version
  echo "-s -w -X $pkg.Version=$release -X $pkg.Revision=unknown -X $pkg.Branch=release -X $pkg.BuildUser=twin -X $pkg.BuildDate=19700101-00:00:00"
}

kube_ldflags() {
  # The stamps hack/lib/version.sh sets in k8s.io/kubernetes (kube::version::ldflags),
  # so /version and kubeVersion checks see the real release, not v0.0.0.
  local v="$kube_version" major minor
  major="${v#v}"; major="${major%%.*}"
  minor="${v#v*.}"; minor="${minor%%.*}"
  local out="-s -w"
  for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
    out+=" -X $pkg.gitVersion=$v -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
    out+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  echo "$out"
}

build_one() {
  local name="$1" version module pkg ldflags
  case "$name" in
    etcd) version="$etcd_version"; module="$here/go/etcd"; pkg="."; ldflags="-s -w" ;;
    kwok) # its consts.Version is spelled without the leading v upstream
      version="$kwok_version"; module="$here/go/kwok"; pkg="sigs.k8s.io/kwok/cmd/kwok"
      ldflags="-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=${version#v}" ;;
    karpenter-kwok) # Karpenter core's kwok cloud provider (capacity); no version stamps
      # are read by it at run time, so none are set.
      version="$karpenter_version"; module="$here/go/karpenter"; pkg="sigs.k8s.io/karpenter/kwok"; ldflags="-s -w" ;;
    prometheus-adapter) # serves custom.metrics.k8s.io from Prometheus with the render's rules
      version="$adapter_version"; module="$here/go/prometheus-adapter"; pkg="sigs.k8s.io/prometheus-adapter/cmd/adapter"
      ldflags="-s -w" ;;
    network-policy-controller) # NetworkPolicy -> PolicyEndpoints, as EKS runs it for its agent
      version="$npc_version"; module="$here/go/network-policy-controller"
      pkg="github.com/aws/amazon-network-policy-controller-k8s/cmd"
      ldflags="-s -w -X github.com/aws/amazon-network-policy-controller-k8s/pkg/version.GitVersion=$version" ;;
    keda-operator|keda-metrics-apiserver) # KEDA's operator and its external-metrics server; every
      # scaler (each cloud's SDK) is compiled in, so the first build is long: see docs/verification.md.
      # The version its logs report (github.com/kedacore/keda/v2/version.Version).
      version="$keda_version"; module="$here/go/keda"
      case "$name" in keda-operator) pkg="github.com/kedacore/keda/v2/cmd/operator" ;; *) pkg="github.com/kedacore/keda/v2/cmd/adapter" ;; esac
      ldflags="-s -w -X github.com/kedacore/keda/v2/version.Version=$version" ;;
    lws) # the LeaderWorkerSet controller and its webhooks (the 671B path); its version stamp is
      # sigs.k8s.io/lws/pkg/version.GitVersion, which its --version and logs print
      version="$lws_version"; module="$here/go/lws"; pkg="sigs.k8s.io/lws/cmd"
      ldflags="-s -w -X sigs.k8s.io/lws/pkg/version.GitVersion=$version" ;;
    coredns) # EKS's cluster DNS, every plugin of its default build; its version stamp is
      # github.com/coredns/coredns/coremain.GitCommit (coremain/version.go reads CoreVersion from source)
      version="$coredns_version"; module="$here/go/coredns"; pkg="github.com/coredns/coredns"; ldflags="-s -w" ;;
    prometheus|promtool) # the Prometheus the pinned kube-prometheus-stack chart runs, and its promtool
      version="$prometheus_version"; module="$here/go/prometheus"
      pkg="github.com/prometheus/prometheus/cmd/$name"; ldflags="$(prometheus_ldflags)" ;;
    kube-apiserver|kube-controller-manager|kube-scheduler)
      version="$kube_version"; module="$here/go/kubernetes"; pkg="./cmd/$name"; ldflags="$(kube_ldflags)" ;;
    *) echo "twin/build.sh: unknown program '$name'" >&2; exit 2 ;;
  esac
  local dest="$cache/$name-$version/$name"
  if [[ -x "$dest" ]]; then echo "twin: $name $version cached at $dest"; return; fi
  mkdir -p "$(dirname "$dest")"
  echo "twin: building $name $version (nice -n 10) ..."
  local start=$SECONDS tmp="$dest.tmp.$$"
  (cd "$module" && nice -n 10 go build -ldflags "$ldflags" -o "$tmp" "$pkg")
  mv "$tmp" "$dest"   # atomic: a half-written binary is never taken as cached
  local took=$((SECONDS - start))
  echo "$(date -u +%FT%TZ) built $name $version in ${took}s" >> "$cache/build-times.log"
  echo "twin: built $name $version in ${took}s -> $dest"
}

names=("$@"); [[ ${#names[@]} -gt 0 ]] || names=(etcd kube-apiserver)
for n in "${names[@]}"; do build_one "$n"; done
