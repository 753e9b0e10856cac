#!/usr/bin/env bash
# A private Docker Engine (Debian's docker.io dockerd) for CI, images/test.sh, the sidecarctl engine tests and the
# benchmarks: its own data root, exec root, socket and pidfile, never the host's /var/run/docker.sock or
# /var/lib/docker. Root only (dockerd needs it).
#
#   images/dockerd.sh start DIR   # starts it (exec root, socket, pidfile and log in DIR), waits until GET /_ping
#                                 # answers OK, prints the DOCKER_HOST value: unix://DIR/docker.sock
#   images/dockerd.sh stop DIR    # SIGTERM to the pid in DIR/dockerd.pid, waits until that process is gone
#   images/dockerd.sh run DIR     # start, print, then stay until stdin reaches its end (the caller exited or closed
#                                 # its pipe) or a SIGTERM/SIGINT comes, then stop: a daemon that cannot outlive the
#                                 # process holding the pipe (the engine tests use it)
#
# SIDECAR_DOCKER_DATA: the data root (default /var/tmp/sidecar-docker). It is kept between runs, as podman's
# storage is, so the local base image, the built images and BuildKit's cache make the next run fast. One dockerd per
# data root: a second one on the same root would corrupt it, so a start while another dockerd uses the root fails
# at once and names it (its pid and socket), and that one can be used with DOCKER_HOST instead.
set -euo pipefail

data="${SIDECAR_DOCKER_DATA:-/var/tmp/sidecar-docker}"
fail() { echo "images/dockerd.sh: $*" >&2; exit 1; }
[ "$#" = 2 ] || fail "usage: images/dockerd.sh start|stop|run DIR"
mode="$1"
dir="$2"

# The pid of a live dockerd whose pidfile is $1, or nothing.
live_pid() {
    local pid
    pid="$(cat "$1" 2>/dev/null)" || return 0
    [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = dockerd ] && echo "$pid"
    return 0
}

stop() {
    local pid
    pid="$(live_pid "$dir/dockerd.pid")"
    [ -n "$pid" ] || return 0
    kill -TERM "$pid"
    # dockerd stops its containers and its containerd, then exits; /proc/PID goes with the process. (Not our child
    # when started by `start`, so there is no wait(2) to block on: poll its /proc entry, with a bound.)
    for _ in $(seq 1 600); do
        [ -d "/proc/$pid" ] || { rm -f "$data.owner"; return 0; }
        sleep 0.1
    done
    fail "dockerd (pid $pid) did not exit within 60 s of SIGTERM; see $dir/dockerd.log"
}

start() {
    command -v dockerd >/dev/null || fail "no dockerd: apt-get install -y docker.io (Debian's Docker Engine)"
    [ "$(id -u)" = 0 ] || fail "dockerd needs root"
    mkdir -p "$dir" "$data"
    dir="$(cd "$dir" && pwd)"
    local socket="$dir/docker.sock" lock pid owner
    # The check for a dockerd on this root and the start are one step: two starts at once cannot both pass it.
    exec {lock}>"$data.lock"
    flock "$lock"
    owner="$(cat "$data.owner" 2>/dev/null || true)"
    if [ -n "$owner" ] && [ -n "$(live_pid "${owner#* }")" ]; then
        fail "the data root $data is in use by dockerd pid $(cat "${owner#* }") (DOCKER_HOST=${owner%% *}):" \
            "use that one, or set SIDECAR_DOCKER_DATA to another folder"
    fi
    # setsid: a Ctrl-C meant for the caller's foreground job does not reach the daemon; `stop` ends it.
    setsid dockerd --data-root "$data" --exec-root "$dir/exec" -H "unix://$socket" --pidfile "$dir/dockerd.pid" \
        </dev/null >"$dir/dockerd.log" 2>&1 {lock}>&- &
    pid=$!
    echo "unix://$socket $dir/dockerd.pid" >"$data.owner"
    flock -u "$lock"
    exec {lock}>&-
    # Ready when the API answers; a daemon that exits (a bad flag, a busy bridge) fails at once with its log.
    for _ in $(seq 1 600); do
        [ "$(curl -s --max-time 2 --unix-socket "$socket" http://localhost/_ping 2>/dev/null)" = OK ] && {
            echo "unix://$socket"
            return 0
        }
        kill -0 "$pid" 2>/dev/null || { tail -20 "$dir/dockerd.log" >&2; fail "dockerd exited before it answered"; }
        sleep 0.1
    done
    tail -20 "$dir/dockerd.log" >&2
    stop
    fail "dockerd did not answer GET /_ping on $socket within 60 s"
}

case "$mode" in
    start) start ;;
    stop) stop ;;
    run)
        trap stop EXIT
        trap 'exit 143' TERM
        trap 'exit 130' INT
        start
        # Until the caller's end of stdin closes. (cat, not read: it ignores lines the caller might send.)
        cat >/dev/null || true
        ;;
    *) fail "usage: images/dockerd.sh start|stop|run DIR" ;;
esac
