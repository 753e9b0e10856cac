#!/bin/sh
# Entrypoint for agent images: writes the PATH wrappers (each command to the build sidecar of its runtime in
# BUILD_SIDECARS, else to the SSH host when SSH_HOST is set; see docs/ssh-exec.md), puts their folder first on
# PATH, then becomes the container's command (exec). In the agent image it runs under tini
# (`/opt/sidecar/tini -s -- /opt/sidecar/entrypoint.sh`), so that command is tini's child: it gets the container's
# SIGTERM with its default action, and orphans are reaped.
#
#   SIDECAR_WRAPPERS_DIR  where the wrappers go (default /opt/sidecar/wrappers)
#   SIDECAR_EXEC          the client that installs them (default /opt/sidecar/sidecar-exec, or /opt/sidecar/ssh-exec
#                         in an image that has only the SSH backend: both have --install-wrappers)
#
# A folder that cannot be written is fatal: an agent without its toolchain would fail later and more obscurely.
set -eu

dir="${SIDECAR_WRAPPERS_DIR:-/opt/sidecar/wrappers}"
client="${SIDECAR_EXEC:-/opt/sidecar/sidecar-exec}"
if [ -z "${SIDECAR_EXEC:-}" ] && [ ! -x "$client" ] && [ -x /opt/sidecar/ssh-exec ]; then
    client=/opt/sidecar/ssh-exec
fi

if ! "$client" --install-wrappers "$dir"; then
    echo "FATAL: could not install the sidecar wrappers in $dir (see the line above)" >&2
    exit 1
fi
# The agent image already has the default folder on PATH (for `docker exec` and `kubectl exec`, which skip this
# script); another folder, or an image without that ENV, gets it here.
case ":${PATH:-}:" in
    *":$dir:"*) ;;
    *) PATH="$dir:${PATH:-/usr/local/bin:/usr/bin:/bin}" ;;
esac
export PATH

if [ "$#" -eq 0 ]; then
    set -- /bin/sh
fi
exec "$@"
