#!/bin/sh
# Runs once, as root, while a builder image is built (images/Dockerfile, stage "builder"):
#
#   builder-setup.sh RUNTIME
#
# Installs only what the base image lacks, so the same Dockerfile builds on the official toolchain images (where
# the toolchain is already there and only tini, the extra tools and the user are added) and on a plain Debian or
# Ubuntu base (where the toolchain itself comes from the distribution's packages, as images/test.sh does).
#
# The base must be a glibc 2.34+ distribution with apt (Debian 12+, Ubuntu 22.04+): exec-server is linked against
# glibc, and everything missing is installed with apt-get. Another base stops the build here with a message.
#
# Environment (the Dockerfile passes its build args):
#   BUILDER_UID, BUILDER_GID  the non-root user "builder" (an existing user or group with that id is removed first:
#                             node's image has "node" and Ubuntu's has "ubuntu" at 1000)
#   TINI_VERSION   tini's upstream version, installed as the package version tini=<version>-*   (default 0.19.0)
#   APT_PINS       name=version-pattern pins for any other package installed here   (e.g. "unzip=6.0-*"); packages
#                  without a pin follow the base image's release (pin the base by digest to freeze them)
#   NODE_TOOLS     npm packages for missing commands   (default "pnpm@9.15.9 yarn@1.22.22"). When the base has
#                  corepack (the node images up to 24 bundle it) it is enabled, and pnpm and yarn come from it at
#                  these versions, so a project's "packageManager" field (yarn@4, pnpm@10) still wins. A
#                  corepack@<version> entry installs corepack where the base lacks it.
#   PYTHON_TOOLS   PyPI packages for missing commands   (default "poetry==2.5.1 pytest==9.2.0 ruff==0.17.6
#                  black==26.10.1 mypy==2.4.1"; poetry goes into its own virtualenv, the rest into the interpreter
#                  the user's packages use)
#   MAVEN_VERSION, GRADLE_VERSION  when mvn / gradle are missing: the upstream release to download; empty: the
#                  distribution's package instead
#   RUST_COMPONENTS rustup components added when rustup is there   (default "rustfmt clippy"; their version is the
#                  toolchain's)
set -eu

runtime="${1:?usage: builder-setup.sh RUNTIME}"
uid="${BUILDER_UID:-1000}"
gid="${BUILDER_GID:-$uid}"

have() { command -v "$1" >/dev/null 2>&1; }
say() { echo "builder-setup: $*"; }
fail() { echo "builder-setup: $*" >&2; exit 1; }

# --- what the base must be -----------------------------------------------------------------------------------------
case "$runtime" in
    node | python | java | go | rust) ;;
    *) fail "unknown runtime '$runtime': RUNTIME must be one of node, python, java, go, rust" ;;
esac
glibc="$(getconf GNU_LIBC_VERSION 2>/dev/null | sed -n 's/^glibc //p' || true)"
[ -n "$glibc" ] || fail "this base has no glibc (Alpine/musl?): exec-server needs glibc 2.34 or later; use a Debian 12+ or Ubuntu 22.04+ base"
major="${glibc%%.*}"
minor="${glibc#*.}"
minor="${minor%%.*}"
if [ "$major" -lt 2 ] || { [ "$major" -eq 2 ] && [ "$minor" -lt 34 ]; }; then
    fail "this base has glibc $glibc: exec-server needs glibc 2.34 or later (it would fail with 'GLIBC_2.34 not found'); use a Debian 12+ or Ubuntu 22.04+ base"
fi

# --- distribution packages for whatever is missing -------------------------------------------------------------
pkgs=""
# Each package with its pin when there is one. Patterns like 0.19.0-* must reach apt-get unexpanded: no globbing.
set -f
want() {
    for name in "$@"; do
        spec="$name"
        for pin in ${TINI_VERSION:+tini=$TINI_VERSION-*} ${APT_PINS:-}; do
            case "$pin" in "$name="?*) spec="$pin" ;; esac
        done
        pkgs="$pkgs $spec"
    done
}

have tini || want tini
case "$runtime" in
    node)
        have node || want nodejs
        have npm || want npm
        ;;
    python)
        have python3 || want python3
        python3 -m pip --version >/dev/null 2>&1 || want python3-pip
        python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || want python3-venv
        ;;
    java)
        have javac || want default-jdk-headless
        if ! have mvn; then if [ -n "${MAVEN_VERSION:-}" ]; then have curl || want curl ca-certificates; else want maven; fi; fi
        if ! have gradle; then if [ -n "${GRADLE_VERSION:-}" ]; then have curl || want curl ca-certificates; have unzip || want unzip; else want gradle; fi; fi
        ;;
    go)
        have go || want golang-go
        ;;
    rust)
        have cargo || want cargo
        have rustc || want rustc
        if ! have rustup; then have rustfmt || want rustfmt; fi
        ;;
esac
if [ -n "$pkgs" ]; then
    have apt-get || fail "this base has no apt-get, and it lacks:$pkgs. Use a Debian or Ubuntu base, or one that already has these commands"
    say "installing distribution packages:$pkgs"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    # shellcheck disable=SC2086
    apt-get install -y -q --no-install-recommends $pkgs
    rm -rf /var/lib/apt/lists/*
fi
set +f

# The tini binary is /usr/bin/tini from the package; the ENTRYPOINT names it through PATH.
have tini || fail "tini is missing"

# --- per-runtime tools ---------------------------------------------------------------------------------------------
name_of() { echo "$1" | sed 's/^\(@\{0,1\}[^@=<>!~ \[]*\).*/\1/'; }   # "pnpm@9" -> pnpm, "ruff==0.6" -> ruff
link() { [ -e "/usr/local/bin/$2" ] || ln -s "$1" "/usr/local/bin/$2"; }

case "$runtime" in
    node)
        specs="${NODE_TOOLS-pnpm@9.15.9 yarn@1.22.22}"
        # npm's own cache for the setup is a temporary folder: the image's /cache/npm starts empty.
        npm_cache="$(mktemp -d)"
        npm_g() {
            say "npm install -g $*"
            npm install -g --no-fund --no-audit --no-update-notifier --cache "$npm_cache" "$@"
        }
        for spec in $specs; do
            if [ "$(name_of "$spec")" = corepack ] && ! have corepack; then npm_g "$spec"; fi
        done
        if have corepack; then
            say "corepack enable: yarn and pnpm follow a project's packageManager field"
            corepack enable
        fi
        missing=""
        for spec in $specs; do
            name="$(name_of "$spec")"
            case "$name" in
                corepack) ;;
                pnpm | yarn)
                    if have corepack; then
                        say "corepack install -g $spec (the version used where no packageManager field says otherwise)"
                        corepack install -g "$spec"
                    elif ! have "$name"; then
                        missing="$missing $spec"
                    fi
                    ;;
                *) have "$name" || missing="$missing $spec" ;;
            esac
        done
        if [ -n "$missing" ]; then
            # shellcheck disable=SC2086
            npm_g $missing
        fi
        rm -rf "$npm_cache"
        # pnpm's store in the cache folder, through pnpm's global config file: npm 10 warns about an unknown
        # npm_config_store_dir on every run.
        install -d -m 1777 /home/builder /home/builder/.config
        install -d -m 0755 /home/builder/.config/pnpm
        echo "store-dir=/cache/pnpm" >/home/builder/.config/pnpm/rc
        ;;
    python)
        # A distribution's "externally managed" marker would stop the builder's own `pip install`; a builder image
        # is exactly the kind of container PEP 668 lets remove it (the official images do not have it).
        rm -f /usr/lib/python3*/EXTERNALLY-MANAGED
        have python || link "$(command -v python3)" python
        if ! have pip3; then python3 -m pip --version >/dev/null && printf '#!/bin/sh\nexec python3 -m pip "$@"\n' >/usr/local/bin/pip3 && chmod 0755 /usr/local/bin/pip3; fi
        have pip || link "$(command -v pip3)" pip
        export PIP_NO_CACHE_DIR=1 PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1
        missing=""
        for spec in ${PYTHON_TOOLS-poetry==2.5.1 pytest==9.2.0 ruff==0.17.6 black==26.10.1 mypy==2.4.1}; do
            name="$(name_of "$spec")"
            have "$name" && continue
            if [ "$name" = poetry ]; then
                say "poetry into its own virtualenv /opt/poetry ($spec)"
                python3 -m venv /opt/poetry
                /opt/poetry/bin/pip install -q "$spec"
                link /opt/poetry/bin/poetry poetry
            else
                missing="$missing $spec"
            fi
        done
        if [ -n "$missing" ]; then
            say "pip install$missing"
            # shellcheck disable=SC2086
            python3 -m pip install -q $missing
        fi
        ;;
    java)
        if ! have mvn && [ -n "${MAVEN_VERSION:-}" ]; then
            say "Apache Maven $MAVEN_VERSION"
            url="https://archive.apache.org/dist/maven/maven-3/$MAVEN_VERSION/binaries/apache-maven-$MAVEN_VERSION-bin.tar.gz"
            curl -fsSL -o /tmp/maven.tgz "$url"
            echo "$(curl -fsSL "$url.sha512" | cut -d' ' -f1)  /tmp/maven.tgz" | sha512sum -c -
            mkdir -p /opt/maven && tar -xzf /tmp/maven.tgz -C /opt/maven --strip-components=1 && rm /tmp/maven.tgz
            link /opt/maven/bin/mvn mvn
        fi
        if ! have gradle && [ -n "${GRADLE_VERSION:-}" ]; then
            say "Gradle $GRADLE_VERSION"
            url="https://services.gradle.org/distributions/gradle-$GRADLE_VERSION-bin.zip"
            curl -fsSL -o /tmp/gradle.zip "$url"
            echo "$(curl -fsSL "$url.sha256")  /tmp/gradle.zip" | sha256sum -c -
            unzip -q /tmp/gradle.zip -d /opt && mv "/opt/gradle-$GRADLE_VERSION" /opt/gradle && rm /tmp/gradle.zip
            link /opt/gradle/bin/gradle gradle
        fi
        ;;
    go)
        have gofmt || { [ -x "$(go env GOROOT)/bin/gofmt" ] && link "$(go env GOROOT)/bin/gofmt" gofmt; }
        ;;
    rust)
        if have rustup; then
            for component in ${RUST_COMPONENTS-rustfmt clippy}; do
                rustup component list --installed | grep -q "^$component-" || rustup component add "$component"
            done
        fi
        # The wrappers forward `clippy`; cargo's own name for it is the `cargo clippy` subcommand.
        if ! have clippy && have cargo-clippy; then
            printf '#!/bin/sh\nexec cargo clippy "$@"\n' >/usr/local/bin/clippy
            chmod 0755 /usr/local/bin/clippy
        fi
        ;;
esac

# --- the user, the workspace, HOME and the caches ------------------------------------------------------------------
# The workspace, HOME and /cache are world-writable with the sticky bit (like /tmp), so the image works both as
# "builder" and under any caller's uid (`--user "$(id -u):$(id -g)"`), including on fresh named volumes (which copy
# these modes). Each cache folder is world-writable and setgid to the builder group, without the sticky bit (tools
# replace each other's entries): with the umask 0002 that builder-entrypoint.sh sets, the folders a tool creates in a
# cache stay writable for every uid in the builder group. A uid outside that group can use a cache volume only
# until it needs a folder another uid created: give it the group (group_add, --group-add, fsGroup) or its own volume.
existing="$(getent passwd "$uid" | cut -d: -f1 || true)"
if [ -n "$existing" ] && [ "$existing" != builder ]; then userdel "$existing"; fi
existing="$(getent group "$gid" | cut -d: -f1 || true)"
if [ -n "$existing" ] && [ "$existing" != builder ]; then groupdel "$existing"; fi
getent group builder >/dev/null || groupadd -g "$gid" builder
getent passwd builder >/dev/null || useradd -u "$uid" -g "$gid" -d /home/builder -M -s /bin/sh builder
install -d -o "$uid" -g "$gid" -m 1777 /workspace /home/builder /cache
for dir in npm pnpm yarn corepack pip poetry m2 gradle go go-build cargo; do
    install -d -o "$uid" -g "$gid" -m 2777 "/cache/$dir"
done
# What the setup itself left under /cache (corepack's package managers) is the builder's and open like its folder.
chown -R "$uid:$gid" /cache
find /cache -mindepth 2 -type d -exec chmod 2777 {} +
find /cache -type f -exec chmod a+rw {} +

# --- the result ------------------------------------------------------------------------------------------------------
say "runtime $runtime ready for uid $uid (glibc $glibc)"
