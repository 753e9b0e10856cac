#!/usr/bin/env python3
"""P1 side by side: `sidecar-exec python true` against two or more servers, runs interleaved.

    python3 bench/p1_pair.py --client BIN [--runs 300] [--section] NAME=[CLIENT_BIN@]SERVER_BIN[,unix] ...

An arm may name its own client (`CLIENT_BIN@`), so two builds can be compared whole: e.g. the binaries of two
branches, `before=OLD/sidecar-exec@OLD/exec-server after=NEW/sidecar-exec@NEW/exec-server`.

Each arm starts its own release exec-server on a throwaway workspace, over TCP (127.0.0.1) or, with `,unix`, over a
UNIX socket (`--listen unix:PATH`, and BUILD_SIDECARS says `unix://PATH`). The arms run one call each in turn, so
a noisy neighbour slows all alike. Prints median and p90 per arm, each arm's median against the first's, and the
median of the per-round differences against the first arm (paired: steadier under load). `--block N` runs N calls
of an arm before the next arm's N, so what a server does after its calls stays in its own block; with
--section, also writes them as the "P1 over a UNIX socket" section of BENCHMARKS.md (bench/run.sh does, with
tcp and unix arms). Standard library only.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import spawn_wait  # noqa: E402
from ssh import write_section  # noqa: E402

SECTION = "## P1 over a UNIX socket"


def start(server, workspace, socket):
    """A server at its default log level (one line per command, drained here); ready at its listening line."""
    args = [server, "--host", "127.0.0.1", "--port", "0", "--cwd", workspace]
    if socket:
        args += ["--listen", f"unix:{socket}"]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    port = None
    for line in proc.stderr:
        if "exec-server listening" in line:
            port = int(line.split("127.0.0.1:")[1].split()[0])
            break
    if port is None:
        raise SystemExit(f"{server} did not start")
    threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()
    url = f"unix://{socket}" if socket else f"http://127.0.0.1:{port}"
    return proc, url


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--client", required=True)
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--block", type=int, default=1, help="calls of one arm before the next arm's (default 1)")
    parser.add_argument("--section", action="store_true", help="write the BENCHMARKS.md section")
    parser.add_argument("arms", nargs="+", help="NAME=SERVER_BIN[,unix]")
    options = parser.parse_args()
    tmp = tempfile.mkdtemp(prefix="p1-pair-")
    procs, arms = [], []
    try:
        for arm in options.arms:
            name, spec = arm.split("=", 1)
            client, _, spec = spec.rpartition("@")
            server, _, transport = spec.partition(",")
            workspace = os.path.join(tmp, name)
            os.makedirs(workspace)
            socket = os.path.join(tmp, f"{name}.sock") if transport == "unix" else None
            proc, url = start(server, workspace, socket)
            procs.append(proc)
            env = {"PATH": "/usr/bin:/bin", "BUILD_SIDECARS": json.dumps({"python": {"internal_url": url}})}
            arms.append((name, [client or options.client, "python", "true"], env, workspace))
        samples = {name: [] for name, *_ in arms}
        for name, argv, env, cwd in arms:  # warm-up
            for _ in range(20):
                spawn_wait(argv, env, cwd=cwd)
        # --block N: N calls of one arm, then N of the next, in turn; a server's work after its calls (the escapee
        # sweep of a batch comes up to 50 ms later) then falls in its own block, not on the other arms' calls.
        for first_run in range(0, options.runs, options.block):
            for name, argv, env, cwd in arms:
                for _ in range(first_run, min(first_run + options.block, options.runs)):
                    samples[name].append(spawn_wait(argv, env, cwd=cwd))
                if options.block > 1:
                    time.sleep(0.1)
        baseline = samples[arms[0][0]]
        first = statistics.median(baseline)
        table = [f"| arm | median | p90 | vs {arms[0][0]} | paired |", "| --- | --- | --- | --- | --- |"]
        for name, values in samples.items():
            median = statistics.median(values)
            p90 = statistics.quantiles(values, n=10)[-1]
            # The median of each round's difference: a neighbour's burst slows one round of both arms alike, so this
            # is steadier under load than the difference of the medians.
            paired = statistics.median(value - base for value, base in zip(values, baseline))
            table.append(f"| {name} | {median * 1000:.2f} ms | {p90 * 1000:.2f} ms | {(median - first) * 1000:+.2f} ms "
                         f"| {paired * 1000:+.2f} ms |")
        print("\n".join(table))
        if options.section:
            write_section([
                SECTION, "",
                f"`sidecar-exec python true` (blocking), {options.runs} runs per arm, interleaved, by `bench/p1_pair.py`: the",
                "same exec-server over TCP (127.0.0.1) and over `--listen unix:PATH` (`internal_url: unix://PATH`).", "",
                *table, "",
                f"Load average during the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores. The transport is a small",
                "part of a call (process starts dominate): compare the difference with its run-to-run spread.",
            ], SECTION)
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
