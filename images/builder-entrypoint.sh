#!/bin/sh
# The builder images' entrypoint, run by tini (PID 1) with the container's command as arguments:
#
#   tini -- builder-entrypoint.sh exec-server -port 8080 -cwd /workspace
#
# 1. umask 0002: what commands create is group-writable. The cache folders under /cache are setgid to the image's
#    builder group, so a folder one uid creates in a cache volume stays writable for every other uid in that group
#    (the compose file adds it with group_add; Kubernetes' fsGroup does the same).
# 2. pip's cache for root: pip uses no cache folder that root does not own (its guard against `sudo pip` filling a
#    user's cache) and says so on every call, and /cache/pip belongs to the builder uid. So a builder run as root
#    (`sidecarctl up` or compose started by root run the builders as the caller) gets a folder of its own inside
#    PIP_CACHE_DIR, created here: root without capabilities can, the cache folders being world-writable. Every other
#    uid shares PIP_CACHE_DIR itself (pip asks only that it be writable). A PIP_CACHE_DIR that root owns, or one this
#    cannot make a root-owned folder in, is left as it is (pip then warns, as before).
# 3. Chains to the base image's own entrypoint when SIDECAR_BASE_ENTRYPOINT names one that exists (eclipse-temurin's
#    /__cacert_entrypoint.sh, which honours USE_SYSTEM_CA_CERTS), which then execs the command.
# 4. Otherwise execs the command itself, so it is tini's child and gets the container's signals.
set -eu
umask 0002
if [ "$(id -u)" = 0 ] && [ -n "${PIP_CACHE_DIR:-}" ]; then
    case "$PIP_CACHE_DIR" in
        /*)
            mkdir -p "$PIP_CACHE_DIR" 2>/dev/null || true
            if [ -d "$PIP_CACHE_DIR" ] && [ "$(stat -c %u "$PIP_CACHE_DIR")" != 0 ]; then
                own="${PIP_CACHE_DIR%/}/root"
                if mkdir -p "$own" 2>/dev/null && [ "$(stat -c %u "$own")" = 0 ]; then
                    export PIP_CACHE_DIR="$own"
                fi
            fi
            ;;
    esac
fi
if [ -n "${SIDECAR_BASE_ENTRYPOINT:-}" ] && [ -x "$SIDECAR_BASE_ENTRYPOINT" ]; then
    exec "$SIDECAR_BASE_ENTRYPOINT" "$@"
fi
exec "$@"
