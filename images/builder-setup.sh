#!/bin/sh
# Runs once, as root, while a builder image is built (images/Dockerfile, stage "builder"):
#
#   builder-setup.sh RUNTIME
#
# Installs only what the base image lacks, so the same Dockerfile builds on the official toolchain images (where
# the toolchain is already there and only tini, the extra tools and the user are added) and on a plain Debian or
# Ubuntu base (where the toolchain itself comes from the distribution's packages, as images/test.sh does).
#
# Environment (the Dockerfile passes its build args):
#   BUILDER_UID, BUILDER_GID  the non-root user "builder" (an existing user or group with that id is removed first:
#                             node's image has "node" and Ubuntu's has "ubuntu" at 1000)
#   NODE_TOOLS     npm packages installed globally when their command is missing   (default "pnpm@9 yarn@1")
#   PYTHON_TOOLS   PyPI packages installed when their command is missing   (default "poetry pytest ruff black mypy";
#                  poetry goes into its own virtualenv, the rest into the interpreter the user's packages use)
#   MAVEN_VERSION, GRADLE_VERSION  when mvn / gradle are missing: the upstream release to download; empty: the
#                  distribution's package instead
#   RUST_COMPONENTS rustup components added when rustup is there   (default "rustfmt clippy")
set -eu

runtime="${1:?usage: builder-setup.sh RUNTIME}"
uid="${BUILDER_UID:-1000}"
gid="${BUILDER_GID:-$uid}"

have() { command -v "$1" >/dev/null 2>&1; }
say() { echo "builder-setup: $*"; }

# --- distribution packages for whatever is missing -------------------------------------------------------------
pkgs=""
want() { pkgs="$pkgs $*"; }

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
        if ! have mvn; then if [ -n "${MAVEN_VERSION:-}" ]; then want curl ca-certificates; else want maven; fi; fi
        if ! have gradle; then if [ -n "${GRADLE_VERSION:-}" ]; then want curl ca-certificates unzip; else want gradle; fi; fi
        ;;
    go)
        have go || want golang-go
        ;;
    rust)
        have cargo || want cargo
        have rustc || want rustc
        if ! have rustup; then have rustfmt || want rustfmt; fi
        ;;
    *)
        echo "builder-setup: unknown runtime '$runtime' (node, python, java, go, rust)" >&2
        exit 2
        ;;
esac
if [ -n "$pkgs" ]; then
    say "installing distribution packages:$pkgs"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    # shellcheck disable=SC2086
    apt-get install -y -q --no-install-recommends $pkgs
    rm -rf /var/lib/apt/lists/*
fi

# The tini binary is /usr/bin/tini from the package; the ENTRYPOINT names it through PATH.
have tini || { echo "builder-setup: tini is missing" >&2; exit 1; }

# --- per-runtime tools ---------------------------------------------------------------------------------------------
name_of() { echo "$1" | sed 's/^\(@\{0,1\}[^@=<>!~ \[]*\).*/\1/'; }   # "pnpm@9" -> pnpm, "ruff==0.6" -> ruff
link() { [ -e "/usr/local/bin/$2" ] || ln -s "$1" "/usr/local/bin/$2"; }

case "$runtime" in
    node)
        missing=""
        for spec in ${NODE_TOOLS-pnpm@9 yarn@1}; do have "$(name_of "$spec")" || missing="$missing $spec"; done
        if [ -n "$missing" ]; then
            say "npm install -g$missing"
            # shellcheck disable=SC2086
            npm install -g --no-fund --no-audit --no-update-notifier $missing
            npm cache clean --force >/dev/null 2>&1 || true
        fi
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
        for spec in ${PYTHON_TOOLS-poetry pytest ruff black mypy}; do
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
# Every folder a build writes to is world-writable with the sticky bit, so the image works both as "builder" and
# under any caller's uid (`--user "$(id -u):$(id -g)"`), including on named volumes (which copy these modes).
existing="$(getent passwd "$uid" | cut -d: -f1 || true)"
if [ -n "$existing" ] && [ "$existing" != builder ]; then userdel "$existing"; fi
existing="$(getent group "$gid" | cut -d: -f1 || true)"
if [ -n "$existing" ] && [ "$existing" != builder ]; then groupdel "$existing"; fi
getent group builder >/dev/null || groupadd -g "$gid" builder
getent passwd builder >/dev/null || useradd -u "$uid" -g "$gid" -d /home/builder -M -s /bin/sh builder
install -d -o "$uid" -g "$gid" -m 0755 /workspace
install -d -o "$uid" -g "$gid" -m 1777 /home/builder /cache
for dir in npm pnpm yarn corepack pip poetry m2 gradle go go-build cargo; do
    install -d -o "$uid" -g "$gid" -m 1777 "/cache/$dir"
done

# --- the result ------------------------------------------------------------------------------------------------------
say "runtime $runtime ready for uid $uid"
