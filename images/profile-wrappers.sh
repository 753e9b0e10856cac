# shellcheck shell=sh
# /etc/profile.d/sidecar-wrappers.sh in the agent image: login shells (`sh -l`, `bash -l`) put the sidecar wrappers
# first on PATH again, because Debian's /etc/profile replaces the PATH the image sets.
case ":$PATH:" in
    *":${SIDECAR_WRAPPERS_DIR:-/opt/sidecar/wrappers}:"*) ;;
    *) PATH="${SIDECAR_WRAPPERS_DIR:-/opt/sidecar/wrappers}:$PATH"; export PATH ;;
esac
