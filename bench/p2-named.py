#!/usr/bin/env python3
"""What naming a run costs a stream, measured more finely than bench.py's P2: the same 224 MiB text and
64 MiB random binary through `sidecar-exec` with SIDECAR_STREAM=1, named (the default) and unnamed
(SIDECAR_RESUME=0) alternating for ROUNDS rounds (default 21) against one release exec-server with default flags
per binary given, so a noisy neighbour slows both alike. Prints the medians, the median of the paired ratios (each
named run against the unnamed one right after it) and the server's CPU per run.

    python3 bench/p2-named.py [LABEL=EXEC_SERVER ...]     (default: main=target/shipped/exec-server)

Build the binaries first (images/binaries.sh). Comparing two servers shows what a change to the run log costs; a
server built to skip the spill-file write (return early in `Pending::write`, exec-server/src/runs/log.rs) is how
the remaining cost was found to be that write alone."""

import json
import os
import statistics
import sys
import tempfile

# The binaries as images/binaries.sh builds and ships them, unless BENCH_BIN_DIR says otherwise.
os.environ.setdefault("BENCH_BIN_DIR", os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                                    "target", "shipped"))

import bench  # noqa: E402 (after BENCH_BIN_DIR: release_server reads it on import)
import release_server  # noqa: E402
from release_server import MiB  # noqa: E402

ROUNDS = int(os.environ.get("ROUNDS", "21"))


def server_cpu(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main():
    release_server.require_binaries("images/binaries.sh")
    specs = sys.argv[1:] or [f"main={release_server.SERVER}"]
    tmp = tempfile.mkdtemp(prefix="p2-named-")
    workspace = os.path.join(tmp, "ws")
    os.makedirs(workspace)
    bench.write_text_file(os.path.join(workspace, "text.txt"), 224 * MiB)
    with open(os.path.join(workspace, "binary.bin"), "wb") as f:
        for _ in range(64):
            f.write(os.urandom(MiB))
    servers = {}
    for spec in specs:
        label, path = spec.split("=", 1)
        release_server.SERVER = path
        servers[label] = release_server.Server(workspace)
    out = os.path.join(tmp, "out")
    results = {}
    for name in ("text.txt", "binary.bin"):
        size = os.path.getsize(os.path.join(workspace, name))
        for _ in range(ROUNDS):
            for label, server in servers.items():
                env = {"PATH": "/usr/bin:/bin", "SIDECAR_STREAM": "1",
                       "BUILD_SIDECARS": json.dumps({"python": {"internal_url": server.url}})}
                for named in (True, False):
                    run_env = env if named else dict(env, SIDECAR_RESUME="0")
                    before = server_cpu(server.proc.pid)
                    took = bench.spawn_wait([release_server.CLIENT, "python", "cat", name], run_env, cwd=workspace,
                                            stdout=out)
                    if os.path.getsize(out) != size:
                        raise RuntimeError(f"{label} {name} named={named}: {os.path.getsize(out)} of {size} bytes")
                    results.setdefault((name, label, named), []).append((took, server_cpu(server.proc.pid) - before))
    print(f"| input | server | named MiB/s | unnamed MiB/s | named/unnamed (medians) | paired | server CPU named / "
          f"unnamed |\n| --- | --- | --- | --- | --- | --- | --- |")
    for name in ("text.txt", "binary.bin"):
        mib = os.path.getsize(os.path.join(workspace, name)) / MiB
        for label in servers:
            named, unnamed = results[(name, label, True)], results[(name, label, False)]
            wall = [statistics.median(t for t, _ in runs) for runs in (named, unnamed)]
            cpu = [statistics.median(c for _, c in runs) for runs in (named, unnamed)]
            paired = statistics.median(u[0] / n[0] for n, u in zip(named, unnamed))
            print(f"| {name} | {label} | {mib / wall[0]:.0f} | {mib / wall[1]:.0f} | {wall[1] / wall[0]:.0%} | "
                  f"{paired:.0%} | {cpu[0]:.2f} s / {cpu[1]:.2f} s |")
    for server in servers.values():
        server.stop()


if __name__ == "__main__":
    main()
