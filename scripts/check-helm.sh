#!/usr/bin/env bash
# Checks the Helm chart deploy/helm/mailhook offline, with no cluster:
#   - helm lint --strict and helm template for every value set in deploy/helm/mailhook/ci/;
#   - every rendered manifest decoded strictly into its Kubernetes or Prometheus Operator API
#     type, and the objects checked against each other (deploy/helm/test: a Go module of its
#     own, so those API types stay out of mailhook's go.mod), the PrometheusRule against
#     deploy/prometheus/alerts.yml;
#   - the rendered config loaded by mailhook's own strict loader with each pod's environment and
#     files, and the grace periods and ports checked against it (deploy/helm/chart_test.go).
#
# helm is built once with `go install` into ~/.cache/mailhook/helm-<version> (outside the
# repository; a few minutes on 2 cores) and reused. When it cannot be had, this fails.
#
#   scripts/check-helm.sh              all of the above (make helm-check; make test runs it)
#   scripts/check-helm.sh render DIR   render the value sets into DIR (deploy/helm/chart_test.go)
#   scripts/check-helm.sh helm         print the cached helm's path, building it when missing
#   scripts/check-helm.sh cached       print the cached helm's path; exit 1 when it is not built
#
# A value set's file may declare, in lines of its own:
#   # check-helm-api-versions: monitoring.coreos.com/v1   served API versions; the set is also
#                                                          rendered without them, as NAME-no-api-versions
#   # check-helm-kube-version: v1.28.0                     the cluster's Kubernetes version
set -euo pipefail

HELM_VERSION=v4.3.2
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CHART=$ROOT/deploy/helm/mailhook
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/mailhook/helm-$HELM_VERSION
HELM=$CACHE/helm
GO=${GO:-go}

log() { printf 'check-helm: %s\n' "$*" >&2; }
die() {
	printf 'check-helm: ERROR: %s\n' "$*" >&2
	exit 1
}

# helm keeps its own caches and config out of the user's home.
export HELM_CACHE_HOME=$CACHE/home/cache HELM_CONFIG_HOME=$CACHE/home/config HELM_DATA_HOME=$CACHE/home/data

ensure_helm() {
	if [[ -x $HELM ]] && "$HELM" version >/dev/null 2>&1; then
		return
	fi
	command -v "$GO" >/dev/null 2>&1 || die "helm $HELM_VERSION is not built in $CACHE and there is no go to build it"
	log "building helm $HELM_VERSION into $CACHE (go install; a few minutes the first time)"
	mkdir -p "$CACHE"
	local tmp
	tmp=$(mktemp -d "$CACHE/build.XXXXXX")
	# From outside the repository: `go install pkg@version` builds with helm's own go.mod.
	if ! (cd "$tmp" && GOBIN=$tmp GOFLAGS=-mod=mod "$GO" install "helm.sh/helm/v4/cmd/helm@$HELM_VERSION" >&2); then
		rm -rf "$tmp"
		die "go install helm.sh/helm/v4/cmd/helm@$HELM_VERSION failed (the Go module proxy must be reachable the first time)"
	fi
	mv "$tmp/helm" "$HELM"
	rm -rf "$tmp"
	"$HELM" version >/dev/null 2>&1 || die "the helm built into $HELM does not run"
}

# header FILE KEY: the value of a "# KEY: value" line of a value set.
header() { sed -n "s/^# $2: *//p" "$1" | head -n 1; }

# The value sets, one NAME per line (ci/NAME-values.yaml).
value_sets() {
	local f
	for f in "$CHART"/ci/*-values.yaml; do
		[[ -e $f ]] || die "no value sets in $CHART/ci"
		basename "$f" -values.yaml
	done
}

# args FILE: the helm flags a value set declares.
args() {
	local api kube out=()
	api=$(header "$1" check-helm-api-versions)
	kube=$(header "$1" check-helm-kube-version)
	[[ -n $api ]] && out+=(--api-versions "$api")
	[[ -n $kube ]] && out+=(--kube-version "$kube")
	if ((${#out[@]})); then
		printf '%s\n' "${out[@]}"
	fi
}

render() {
	local dir=$1 name f
	mkdir -p "$dir"
	while read -r name; do
		f=$CHART/ci/$name-values.yaml
		local extra=()
		mapfile -t extra < <(args "$f")
		"$HELM" template mailhook "$CHART" --namespace mailhook -f "$f" "${extra[@]}" >"$dir/$name.yaml" ||
			die "helm template failed for ci/$name-values.yaml"
		if [[ -n $(header "$f" check-helm-api-versions) ]]; then
			local kube
			kube=$(header "$f" check-helm-kube-version)
			"$HELM" template mailhook "$CHART" --namespace mailhook -f "$f" ${kube:+--kube-version "$kube"} >"$dir/$name-no-api-versions.yaml" ||
				die "helm template failed for ci/$name-values.yaml without its API versions"
		fi
	done < <(value_sets)
}

lint() {
	local name f
	while read -r name; do
		f=$CHART/ci/$name-values.yaml
		local kube
		kube=$(header "$f" check-helm-kube-version)
		"$HELM" lint --strict --quiet "$CHART" -f "$f" ${kube:+--kube-version "$kube"} >&2 ||
			die "helm lint failed for ci/$name-values.yaml"
	done < <(value_sets)
}

case ${1:-} in
render)
	[[ -n ${2:-} ]] || die "usage: $0 render DIR"
	ensure_helm
	render "$2"
	;;
helm)
	ensure_helm
	echo "$HELM"
	;;
cached)
	[[ -x $HELM ]] || exit 1
	echo "$HELM"
	;;
"")
	ensure_helm
	log "helm lint --strict, each value set in deploy/helm/mailhook/ci"
	lint
	out=$(mktemp -d)
	trap 'rm -rf "$out"' EXIT
	log "helm template, each value set"
	render "$out"
	log "strict decoding and the manifests' checks (deploy/helm/test)"
	(cd "$ROOT/deploy/helm/test" && "$GO" vet ./... && MAILHOOK_HELM_RENDERED=$out "$GO" test -count=1 ./...)
	log "the rendered config through mailhook's loader (deploy/helm)"
	(cd "$ROOT" && MAILHOOK_HELM_RENDERED=$out "$GO" test -count=1 ./deploy/helm/)
	log "the chart passes"
	;;
*)
	die "usage: $0 [render DIR | helm | cached]"
	;;
esac
