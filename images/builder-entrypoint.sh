#!/bin/sh
# The builder images' entrypoint, run by tini (PID 1) with the container's command as arguments:
#
#   tini -- builder-entrypoint.sh exec-server -port 8080 -cwd /workspace
#
# 1. umask 0002: what commands create is group-writable. The cache folders under /cache are setgid to the image's
#    builder group, so a folder one uid creates in a cache volume stays writable for every other uid in that group
#    (the compose file adds it with group_add; Kubernetes' fsGroup does the same).
# 2. Chains to the base image's own entrypoint when SIDECAR_BASE_ENTRYPOINT names one that exists (eclipse-temurin's
#    /__cacert_entrypoint.sh, which honours USE_SYSTEM_CA_CERTS), which then execs the command.
# 3. Otherwise execs the command itself, so it is tini's child and gets the container's signals.
set -eu
umask 0002
if [ -n "${SIDECAR_BASE_ENTRYPOINT:-}" ] && [ -x "$SIDECAR_BASE_ENTRYPOINT" ]; then
    exec "$SIDECAR_BASE_ENTRYPOINT" "$@"
fi
exec "$@"
