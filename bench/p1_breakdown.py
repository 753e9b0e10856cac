#!/usr/bin/env python3
"""Where a forwarded call's time goes (P1's +1.0 ms goal): its parts measured apart, interleaved in one run.

    python3 bench/p1_breakdown.py [--client BIN] [--server BIN] [--runs 400] [--section]

Arms, one call each in turn against one release exec-server (BENCH_BIN_DIR, else target/release; or the binaries
named), so a noisy neighbour slows all alike:

- native `true` (the baseline, started with `posix_spawn` and waited for, as every arm that starts a process);
- the client's start-up and exit with nothing sent: `sidecar-exec --version`;
- the server's part alone: this process connects (a new TCP connection, as the client makes), sends the very
  request the client sends for `sidecar-exec python true` (its headers, a new run id each time) and reads the reply
  until the exit frame; that is the server's parse, spawn and wait of `true`, its reply, and the loopback;
- the same request without its run id: what keeping the run for a reattach (a named run) costs the server;
- the whole call: `sidecar-exec python true`;
- the floor: the same request from the least client there is (sidecar-exec/examples/p1_floor.rs, built static as
  the clients are: one blocking request, no runtime, no HTTP client), started and waited for like the whole call.
  What the whole call costs beyond it is all any client stack could still save; what it costs beyond native `true`
  is the server's part and the second process;
- the bare floor: the least client against the least server (exec-server/examples/p1_floor_server.rs: a thread per
  connection, std's spawn and wait, one reply), a server of its own: what two processes and a TCP connection cost
  with no client and no server work at all.

The client's own work (building the request, its runtime, the HTTP client, reading the stream) is what the whole
call costs beyond its start-up and the server's part. With --section, writes the "P1: where a forwarded call's time
goes" section of BENCHMARKS.md. Standard library only.
"""

import argparse
import json
import os
import secrets
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import spawn_wait  # noqa: E402
from p1_pair import start as start_server  # noqa: E402
from release_server import CLIENT, SERVER  # noqa: E402
from ssh import write_section  # noqa: E402

SECTION = "## P1: where a forwarded call's time goes"


# What the work on this goal cut and measured, and what it left (perf stat, perf record, perf sched, strace
# -c and the A/Bs named; 2026-12-01, 2 shared cores). Constant text: those sessions' measurements, not this run's.
WHAT_WAS_DONE = [
    "What was cut for the goal of a call through a wrapper ≤ native + 1.0 ms, each measured apart:",
    "",
    "- The escapee sweep read every process's `/proc/<pid>/environ` once per finished command that may keep its "
    "daemons and once more per batch; it now reads them once per batch (`Tagged::find_by_tag`), and a second time "
    "only when something is to be ended. Server CPU per back-to-back call 1.62 → 0.67 ms (this script, old and new "
    "server, ~125 processes on the machine); the whole call −0.08 to −0.26 ms paired in `bench/p1_pair.py --block "
    "50` (800 runs, same client, three runs; in blocks, since one server's sweep would otherwise slow the other's "
    "calls too).",
    "- The shipped client is a static executable, not static-pie (`images/binaries.sh`): no self-relocation at "
    "start, page faults per forwarded call 99 → 82, and −0.07 to −0.11 ms paired against static-pie in "
    "`bench/p1_pair.py` (1000 runs, same server, three runs).",
    "- Which named run gives way or expires is an index by end time: every named request scanned all `--max-runs` "
    "kept runs (a mutex each) and the 2048 tombstones, twice; at the steady state of many calls that was 6.4% of "
    "the server's worker CPU per call (`perf record`), now 1.8% for the whole claim.",
    "- A call through a link wrapper skips clap (its arguments are all the command's) and the runtime's teardown "
    "(the process exits right after): each ~5% of the client's CPU; with the claim index, −0.09 ms paired through a "
    "link wrapper (1000 runs in blocks of 50, old and new builds).",
    "- A stream's head waits up to 5 ms for its first events, so a short command's reply is one write (head, exit "
    "frame and the body's end in one `writev`, one read in the client): −0.03 ms paired (2000 runs in blocks of 50).",
    "- A named run's command and its log's filling are one task, not two (one hand-off less before the spawn and "
    "after the exit): −0.06 ms paired (1000 runs in blocks of 50); a named run then costs ~0.07 ms over an unnamed "
    "one, paired, where it cost ~0.13.",
    "",
    "Measured and left: one tokio worker in the server (`TOKIO_WORKER_THREADS=1`) gave −0.04 ms paired on the "
    "server's part (600 runs), within the noise. Not a change but a trap: `cargo build --release` makes a dynamic "
    "PIE client whose start-up costs about twice the static one's CPU (`--version`: 0.73 against 0.36 ms "
    "task-clock); this table and \"P1 through a wrapper\" measure the shipped binaries (`images/binaries.sh`).",
    "",
    "What is left, and why the goal is not met: the two floor rows. The least client there is (one blocking "
    "request, no runtime, nothing else) makes the same call about +1.2 ms over native `true`, so even a client that "
    "cost nothing would leave the call short of the goal; and the least client against the least server (a thread "
    "per connection, std's spawn and wait, one reply) is +0.9 to +1.05 ms (this table, and a scratch A/B of 1000 "
    "runs): two processes and a TCP connection cost about the goal's whole budget on these machines before either "
    "program does any of its work (named runs, the token, confinement, streaming, stdin, signals, the sweep). One "
    "call's timeline by `perf sched timehist` (idle machine): the client from its fork to its connect 0.67 ms (a "
    "`true`'s whole life is 0.55), the server from accept to spawn 0.24 ms, the spawn and `true` 0.66 ms (as "
    "natively), from `true`'s exit to the exit frame 0.14 ms, and from the frame to the client's exit seen by its "
    "parent 0.23 ms. A forwarded call starts two processes where native starts one, and it crosses from one "
    "process or CPU to another five times where native crosses once (client → server, server → spawned child, "
    "child's exit → server, exit frame → client, client's exit → caller); on these VMs each crossing that wakes an "
    "idle vCPU costs 20–70 µs. Within the server, no piece is large any more: per call, the HTTP request and its "
    "JSON, the named run (~0.07 ms against an unnamed one, paired), the working directory and the PATH lookup, "
    "glibc's `posix_spawn` (whose child resets every signal before `exec`: 121 `rt_sigaction` calls), the pidfd "
    "wake-up and the exit frame.",
]


def example(crate, name):
    """An example built as images/binaries.sh builds its crate's shipped binary: the least client
    (sidecar-exec/examples/p1_floor.rs, static) or the least server (exec-server/examples/p1_floor_server.rs)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    built = subprocess.run([os.path.join(root, "images", "binaries.sh"), "--example", crate, name], cwd=root,
                           check=True, capture_output=True, text=True)
    return built.stdout.strip().splitlines()[-1]


def server_part(port, cwd, named=True):
    """One call as the client makes it, from this process: seconds until the exit frame has arrived. With
    named=False the same request without a run id (a run the server does not keep for a reattach)."""
    request = {"cmd": ["true"], "cwd": cwd, "timeout": 600, "env": {}, "b64_only": True}
    if named:
        request["run_id"] = secrets.token_hex(16)
    body = json.dumps(request, separators=(",", ":")).encode()
    head = (f"POST /exec HTTP/1.1\r\naccept: text/event-stream, application/json;q=0.5\r\n"
            f"content-type: application/json\r\nuser-agent: sidecar-exec/0.1.0\r\nhost: 127.0.0.1:{port}\r\n"
            f"content-length: {len(body)}\r\n\r\n").encode()
    started = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port)) as conn:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn.sendall(head + body)
        seen = b""
        while b'"type":"exit"' not in seen:
            data = conn.recv(65536)
            if not data:
                raise RuntimeError(f"the server closed before the exit frame: {seen[-300:]!r}")
            seen += data
    return time.perf_counter() - started


def linkage(binary):
    """How `binary` is linked, from its ELF headers: "static", "static-pie" or "dynamic" (has an interpreter). The
    figures of a client depend on it: images/binaries.sh ships a static one, `cargo build --release` makes a
    dynamic PIE."""
    with open(binary, "rb") as f:
        header = f.read(64)
        e_type, = struct.unpack_from("<H", header, 16)
        phoff, = struct.unpack_from("<Q", header, 32)
        phentsize, phnum = struct.unpack_from("<HH", header, 54)
        f.seek(phoff)
        table = f.read(phentsize * phnum)
    types = {struct.unpack_from("<I", table, i * phentsize)[0] for i in range(phnum)}
    if 3 in types:  # PT_INTERP
        return "dynamic"
    return "static-pie" if e_type == 3 else "static"  # ET_DYN, else ET_EXEC


def server_cpu(pid):
    """The CPU seconds (user and system, all threads) the server process has used, its children not included."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--client", default=CLIENT)
    parser.add_argument("--server", default=SERVER)
    parser.add_argument("--runs", type=int, default=400)
    parser.add_argument("--section", action="store_true", help="write the BENCHMARKS.md section")
    options = parser.parse_args()
    for binary in (options.client, options.server):
        if not os.path.exists(binary):
            raise SystemExit(f"{binary} is missing: build the release binaries (bench/run.sh does)")
    tmp = tempfile.mkdtemp(prefix="p1-breakdown-")
    proc = least_server = None
    try:
        workspace = os.path.join(tmp, "ws")
        os.makedirs(workspace)
        proc, url = start_server(options.server, workspace, None)
        port = int(url.rsplit(":", 1)[1])
        env = {"PATH": "/usr/bin:/bin", "BUILD_SIDECARS": json.dumps({"python": {"internal_url": url}})}
        null = os.open("/dev/null", os.O_RDONLY)
        true = shutil.which("true")
        floor = example("sidecar-exec", "p1_floor")
        floor_env = dict(env, P1_FLOOR_ADDR=f"127.0.0.1:{port}")
        least_server, least_url = start_server(example("exec-server", "p1_floor_server"), workspace, None)
        least_env = dict(env, P1_FLOOR_ADDR=least_url.split("//", 1)[1])
        arms = {
            "native `true`": lambda: spawn_wait([true], env, cwd=workspace, stdin_fd=null),
            "client start-up and exit (`sidecar-exec --version`)":
                lambda: spawn_wait([options.client, "--version"], env, cwd=workspace, stdin_fd=null,
                                   stdout="/dev/null"),
            "server's part (a new connection, the client's request, until the exit frame)":
                lambda: server_part(port, workspace),
            "the server's part without a run id (not a named run)":
                lambda: server_part(port, workspace, named=False),
            "whole call (`sidecar-exec python true`)":
                lambda: spawn_wait([options.client, "python", "true"], env, cwd=workspace, stdin_fd=null),
            "the floor: the same call from the least client (`p1_floor`)":
                lambda: spawn_wait([floor], floor_env, cwd=workspace, stdin_fd=null),
            "the least client and the least server (`p1_floor` → `p1_floor_server`)":
                lambda: spawn_wait([floor], least_env, cwd=workspace, stdin_fd=null),
        }
        samples = {name: [] for name in arms}
        for arm in arms.values():  # warm-up
            for _ in range(20):
                arm()
        cpu_before = server_cpu(proc.pid)
        for _ in range(options.runs):
            for name, arm in arms.items():
                samples[name].append(arm())
        # Four arms call the server each round; its sweep of a batch of finished commands comes up to 50 ms later.
        time.sleep(0.2)
        cpu_per_call = (server_cpu(proc.pid) - cpu_before) / (4 * options.runs)
    finally:
        for server in (proc, least_server):
            if server:
                server.kill()
                server.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    median = {name: statistics.median(values) for name, values in samples.items()}
    native, start, served, unnamed, whole, least, bare = (median[name] for name in arms)
    rest = whole - start - served
    rows = ["| part | median | p90 |", "| --- | --- | --- |"]
    for name, values in samples.items():
        rows.append(f"| {name} | {median[name] * 1000:.2f} ms | {statistics.quantiles(values, n=10)[-1] * 1000:.2f} ms |")
    lines = [
        SECTION,
        "",
        f"By `bench/p1_breakdown.py`, {options.runs} runs per arm, interleaved, against one release exec-server "
        f"(client `{os.path.relpath(options.client)}`, {linkage(options.client)}; load average {os.getloadavg()[0]:.1f} at the end of the run).",
        "",
        *rows,
        "",
        f"The whole call is {(whole - native) * 1000:+.2f} ms over native `true`: the client's start-up and exit "
        f"{(start - native) * 1000:+.2f} ms over a `true`'s, the server's part {served * 1000:.2f} ms (running "
        f"`true` there included, {(served - native) * 1000:+.2f} ms over running it here), and the client's own "
        f"work between them {rest * 1000:.2f} ms (the whole call less its start-up and the server's part). Of the "
        f"server's part, keeping the run for a reattach (the run id the client sends for its transparent resume) "
        f"is {(served - unnamed) * 1000:+.2f} ms. The least client makes the same call {(least - native) * 1000:+.2f} ms "
        f"over native `true`: sidecar-exec's whole stack (runtime, HTTP client, settings, stdin and signal handling) "
        f"costs {(whole - least) * 1000:+.2f} ms beyond it, so the rest of the call's overhead is the server's part and "
        "the second process. The least client against the least server (a thread per connection, std's spawn and "
        f"wait, one reply: nothing of what exec-server does but the spawn) is {(bare - native) * 1000:+.2f} ms over "
        f"native `true`: what two processes and a TCP connection cost by themselves here, so exec-server's own "
        f"part is {(least - bare) * 1000:+.2f} ms and sidecar-exec's {(whole - least) * 1000:+.2f} ms.",
        f"The server used {cpu_per_call * 1000:.2f} ms of CPU per call (all its threads, not the command's; on 2 "
        "cores that competes with the call itself).",
        "",
        *WHAT_WAS_DONE,
    ]
    print("\n".join(lines))
    if options.section:
        write_section(lines, SECTION)


if __name__ == "__main__":
    main()
