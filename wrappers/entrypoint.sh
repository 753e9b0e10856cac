#!/bin/sh
# Entrypoint for agent images: writes the PATH wrappers (each command to the build sidecar of its runtime in
# BUILD_SIDECARS, else to the SSH host when SSH_HOST is set; see docs/ssh-exec.md), puts their folder first on
# PATH, then becomes the container's command (exec), so that command is PID 1's successor and receives the
# container's signals itself.
#
#   SIDECAR_WRAPPERS_DIR  where the wrappers go (default /opt/sidecar/wrappers)
#   SIDECAR_EXEC          the client binary (default /opt/sidecar/sidecar-exec)
#
# A folder that cannot be written is fatal: an agent without its toolchain would fail later and more obscurely.
set -eu

dir="${SIDECAR_WRAPPERS_DIR:-/opt/sidecar/wrappers}"
client="${SIDECAR_EXEC:-/opt/sidecar/sidecar-exec}"

if ! "$client" --install-wrappers "$dir"; then
    echo "FATAL: could not install the sidecar wrappers in $dir (see the line above)" >&2
    exit 1
fi
PATH="$dir:${PATH:-/usr/local/bin:/usr/bin:/bin}"
export PATH

if [ "$#" -eq 0 ]; then
    set -- /bin/sh
fi
exec "$@"
