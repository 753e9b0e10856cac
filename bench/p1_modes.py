#!/usr/bin/env python3
"""The default path (docs/client.md, "The default path") against the old blocking call, measured in the same run.

    python3 bench/p1_modes.py --client BIN --server BIN [--runs 400] [--section]

P1: `sidecar-exec python true` with stdin /dev/null in each mode (SIDECAR_STREAM=0, the old blocking call; the
default, negotiated; SIDECAR_STREAM=1), with stdin a pipe that stays open (the default streams it: what an agent's
never-closing pipe costs), and native `true`; one call of each arm in turn, so a noisy neighbour slows all alike.
P7: 100 MiB piped into `sha256sum`, natively and forwarded in the default mode, interleaved. With --section,
writes the "Default path" section of BENCHMARKS.md. Standard library only.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import spawn_wait  # noqa: E402
from p1_pair import start  # noqa: E402
from ssh import write_section  # noqa: E402

SECTION = "## Default path: negotiated streaming and streamed stdin"
P7_BYTES = 100 * 1024 * 1024


def p90(values):
    return statistics.quantiles(values, n=10)[-1]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--client", required=True)
    parser.add_argument("--server", required=True)
    parser.add_argument("--runs", type=int, default=400)
    parser.add_argument("--p7-runs", type=int, default=5)
    parser.add_argument("--section", action="store_true")
    options = parser.parse_args()
    tmp = tempfile.mkdtemp(prefix="p1-modes-")
    proc = None
    try:
        proc, url = start(options.server, tmp, None)
        base = {"PATH": "/usr/bin:/bin", "BUILD_SIDECARS": json.dumps({"python": {"internal_url": url}})}
        null = os.open("/dev/null", os.O_RDONLY)
        held_read, held_write = os.pipe()  # never written, never closed while the arms run
        forwarded = [options.client, "python", "true"]
        arms = [
            ("native `true`", ["/bin/true"], base, null),
            ("blocking (SIDECAR_STREAM=0, the old call)", forwarded, {**base, "SIDECAR_STREAM": "0"}, null),
            ("default (negotiated stream)", forwarded, base, null),
            ("SIDECAR_STREAM=1", forwarded, {**base, "SIDECAR_STREAM": "1"}, null),
            ("default, stdin an open pipe (streamed)", forwarded, base, held_read),
        ]
        samples = {name: [] for name, *_ in arms}
        for _, argv, env, stdin in arms:  # warm-up
            for _ in range(20):
                spawn_wait(argv, env, cwd=tmp, stdin_fd=stdin)
        for _ in range(options.runs):
            for name, argv, env, stdin in arms:
                samples[name].append(spawn_wait(argv, env, cwd=tmp, stdin_fd=stdin))
        os.close(held_write)
        native = statistics.median(samples[arms[0][0]])
        blocking = statistics.median(samples[arms[1][0]])
        p1 = ["| arm | median | p90 | over native | vs blocking |", "| --- | --- | --- | --- | --- |"]
        for name, values in samples.items():
            median = statistics.median(values)
            p1.append(
                f"| {name} | {median * 1000:.2f} ms | {p90(values) * 1000:.2f} ms | {(median - native) * 1000:+.2f} ms "
                f"| {(median - blocking) * 1000:+.2f} ms |"
            )
        default = statistics.median(samples[arms[2][0]])

        # P7: 100 MiB into sha256sum, natively and forwarded (default mode), interleaved; the digests must agree.
        data = os.path.join(tmp, "data")
        with open(data, "wb") as f:
            block = os.urandom(1024 * 1024)
            for _ in range(P7_BYTES // len(block)):
                f.write(block)
        lines = {
            "native `cat data \\| sha256sum`": "cat data | sha256sum",
            "forwarded `cat data \\| sidecar-exec python sha256sum`": f"cat data | {options.client} python sha256sum",
        }
        p7_samples = {name: [] for name in lines}
        digests = set()
        for _ in range(options.p7_runs):
            for name, line in lines.items():
                started = time.perf_counter()
                out = subprocess.run(["sh", "-c", line], cwd=tmp, env=base, capture_output=True, check=True)
                p7_samples[name].append(time.perf_counter() - started)
                digests.add(out.stdout.split()[0])
        if len(digests) != 1:
            raise SystemExit(f"P7: the digests differ: {digests}")
        p7_native = statistics.median(p7_samples[next(iter(lines))])
        p7 = ["| pipe | median | throughput | vs native |", "| --- | --- | --- | --- |"]
        for name, values in p7_samples.items():
            median = statistics.median(values)
            p7.append(
                f"| {name} | {median:.2f} s | {P7_BYTES / median / 2**20:.0f} MiB/s | {p7_native / median * 100:.0f}% |"
            )
        forwarded_share = p7_native / statistics.median(p7_samples[list(lines)[1]]) * 100
        print("\n".join(p1 + [""] + p7))
        if options.section:
            write_section([
                SECTION, "",
                f"By `bench/p1_modes.py`, {options.runs} runs per arm, interleaved, against one release exec-server "
                "(`python true` forwarded, started with `posix_spawn`).", "",
                *p1, "",
                f"Goal: streaming by default costs P1 at most 0.1 ms against the blocking call: "
                f"{'met' if default - blocking <= 0.0001 else '**not met**'} ({(default - blocking) * 1000:+.2f} ms).",
                "",
                f"P7: {P7_BYTES // 2**20} MiB of random bytes piped into `sha256sum`, {options.p7_runs} runs each, "
                "interleaved; the digests agree.", "",
                *p7, "",
                f"Goal: ≥ 25% of the native pipe's throughput: "
                f"{'met' if forwarded_share >= 25 else '**not met**'} ({forwarded_share:.0f}%).", "",
                f"Load average during the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores: under load the p90s",
                "are mostly the neighbours'; the medians of arms measured in turn are what the goals compare.",
            ], SECTION)
    finally:
        if proc:
            proc.kill()
            proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
