#!/usr/bin/env python3
"""Build daemons: a second build native, against the same build forwarded with its daemon ended and kept.

Usage: daemons.py [--rounds N] [--work DIR] TOOL...   (TOOL: gradle-edit, gradle-noop, bazel). bench/daemons.sh
installs the tools and runs it; release binaries come from $BENCH_BIN_DIR (default target/release).

Each round runs, in this order (so a noisy neighbour slows all modes of a round alike):
  first    native, no daemon, no build outputs
  second   native, one source changed, the daemon of `first` alive: the baseline every ratio is against
  ended    `sidecar-exec build <tool…>` to an exec-server started with `--daemons end` (the former default:
           every escapee ends with its command), after a forwarded build whose daemon that server ended
  kept     the same to an exec-server with the default policy (`--daemons keep`), after a forwarded build whose
           daemon that server kept
After `ended` the script checks that no daemon is left; after `kept` that the daemon the server kept was the one
the build used (same pid before and after). After the last round both servers are stopped and the script checks
that none of the daemons is left (the kept one is ended at shutdown). The projects are generated into --work.
Standard library only.
"""

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from release_server import CLIENT, Server, require_binaries  # noqa: E402

GRACE = 5.0
MODES = ("first", "second", "ended", "kept")


def log(message):
    print(message, file=sys.stderr, flush=True)


# --- processes ---------------------------------------------------------------------------------------------------

def pids():
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def read(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return b""


def cmdline(pid):
    return read(f"/proc/{pid}/cmdline").replace(b"\0", b" ")


def alive(pid):
    stat = read(f"/proc/{pid}/stat")
    return bool(stat) and stat.rsplit(b")", 1)[1].split()[0] != b"Z"


def terminate(found):
    """SIGTERM, up to GRACE for them to go, SIGKILL: how the native side ends a daemon between modes."""
    for p in found:
        try:
            os.kill(p, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + GRACE
    while time.monotonic() < deadline and any(alive(p) for p in found):
        time.sleep(0.02)
    for p in found:
        if alive(p):
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass


def wait_gone(find, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not find():
            return True
        time.sleep(0.05)
    return not find()


# --- the tools ---------------------------------------------------------------------------------------------------

class Tool:
    """A generated project, its build command, how to change one source, how to recognise its daemon."""

    name = ""
    project = ""

    def __init__(self, work):
        self.work = work
        self.cwd = os.path.join(work, "projects", self.project)
        self.home = os.path.join(work, "home")

    argv = property(lambda self: [])
    env = property(lambda self: {})

    def generate(self):
        pass

    def change(self, n):
        pass

    def clean(self):
        pass

    def daemons(self):
        return [p for p in pids() if self.is_daemon(p)]

    def is_daemon(self, pid):
        raise NotImplementedError

    def stop(self):
        terminate(self.daemons())


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


class GradleEdit(Tool):
    """20 Java classes in a chain; one class changed between builds."""

    name = "gradle-edit"
    project = "gradle-java"
    argv = property(lambda self: ["gradle", "--offline", "build"])
    env = property(lambda self: {"GRADLE_USER_HOME": os.path.join(self.home, "gradle")})

    def generate(self):
        write(os.path.join(self.cwd, "build.gradle"),
              "apply plugin: 'java'\nsourceCompatibility = 1.8\ntargetCompatibility = 1.8\n")
        write(os.path.join(self.cwd, "settings.gradle"), "rootProject.name = 'demo'\n")
        for i in range(2, 21):
            write(self.source(i), "package demo;\n"
                  f"public class C{i} {{\n    public static int value(int x) {{ return x * {i} + C{i - 1}.base(); }}\n"
                  f"    public static int base() {{ return {i}; }}\n}}\n")
        write(os.path.join(self.cwd, "src/main/java/demo/Main.java"), "package demo;\n"
              "public class Main { public static void main(String[] a) { System.out.println(C20.value(2)); } }\n")
        self.change(0)

    def source(self, i):
        return os.path.join(self.cwd, f"src/main/java/demo/C{i}.java")

    def change(self, n):
        write(self.source(1), "package demo;\npublic class C1 {\n"
              f"    public static int value(int x) {{ return x * {n} + base(); }}\n"
              "    public static int base() { return 1; }\n}\n")

    def clean(self):
        for d in ("build", ".gradle"):
            shutil.rmtree(os.path.join(self.cwd, d), ignore_errors=True)

    def is_daemon(self, pid):
        return b"org.gradle.launcher.daemon.bootstrap.GradleDaemon" in cmdline(pid)


class GradleNoop(GradleEdit):
    """The same project, nothing changed: the daemon's up-to-date check alone."""

    name = "gradle-noop"

    def change(self, n):
        if not os.path.exists(self.source(1)):
            super().change(n)


class Bazel(Tool):
    """A genrule over 50 inputs; one input changed between builds."""

    name = "bazel"
    project = "bazel-java"
    argv = property(lambda self: ["bazel", f"--output_user_root={os.path.join(self.home, 'bazel')}", "build", "//:gen"])

    def generate(self):
        write(os.path.join(self.cwd, "WORKSPACE"), "")
        write(os.path.join(self.cwd, "BUILD"), 'genrule(\n    name = "gen",\n    srcs = glob(["src/*.txt"]),\n'
              '    outs = ["all.txt"],\n    cmd = "cat $(SRCS) | sort > $@",\n)\n')
        for i in range(2, 51):
            write(os.path.join(self.cwd, f"src/f{i}.txt"), f"line {i}\n")
        self.change(0)

    def change(self, n):
        write(os.path.join(self.cwd, "src/f1.txt"), f"line 1 version {n}\n")

    def clean(self):
        # `bazel clean --expunge` needs the server; the output base of this workspace holds the outputs.
        subprocess.run(self.argv[:2] + ["clean", "--expunge"], cwd=self.cwd, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, env=native_env(self), timeout=300)

    def is_daemon(self, pid):
        line = cmdline(pid)
        return line.startswith(b"bazel(") and b"A-server.jar" in line


TOOLS = {t.name: t for t in (GradleEdit, GradleNoop, Bazel)}


# --- running -----------------------------------------------------------------------------------------------------

BASE_ENV = {k: os.environ[k] for k in ("PATH", "HOME", "LANG", "USER") if k in os.environ}


def native_env(tool):
    return dict(BASE_ENV, **tool.env)


def timed(argv, cwd, env, timeout=900):
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout)
    took = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"{argv} in {cwd} exited {proc.returncode}:\n{proc.stdout.decode()[-2000:]}"
                           f"\n{proc.stderr.decode()[-2000:]}")
    return took


class Forwarder:
    """One exec-server (with `args`) whose environment is every tool's, and the client's environment to reach it."""

    def __init__(self, work, tools, *args):
        env = dict(BASE_ENV)
        for tool in tools:
            env.update(tool.env)
        self.server = Server(os.path.join(work, "projects"), *args, env=env)
        self.client_env = {"PATH": "/usr/bin:/bin", "HOME": os.environ["HOME"],
                           "BUILD_SIDECARS": json.dumps({"build": {"internal_url": self.server.url}})}

    def run(self, tool):
        return timed([CLIENT, "build", *tool.argv], tool.cwd, self.client_env)

    def stop(self):
        self.server.stop()


def one_round(tool, ended, kept, r, out):
    n = r * 10
    sample = {}
    tool.stop()
    tool.clean()
    tool.change(n)
    sample["first"] = timed(tool.argv, tool.cwd, native_env(tool))
    tool.change(n + 1)
    sample["second"] = timed(tool.argv, tool.cwd, native_env(tool))

    tool.stop()
    tool.change(n + 2)
    ended.run(tool)
    sample["ended_warm_leftover"] = not wait_gone(tool.daemons, GRACE + 2)
    tool.change(n + 3)
    sample["ended"] = ended.run(tool)
    sample["ended_leftover"] = not wait_gone(tool.daemons, GRACE + 2)

    tool.stop()
    tool.change(n + 4)
    kept.run(tool)
    before = tool.daemons()
    tool.change(n + 5)
    sample["kept"] = kept.run(tool)
    sample["kept_reused"] = bool(before) and before == tool.daemons()
    out.append(sample)
    log(f"  {tool.name} round {r}: " + ", ".join(
        f"{k} {v:.2f} s" if isinstance(v, float) else f"{k} {v}" for k, v in sample.items()))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tools", nargs="+", choices=sorted(TOOLS))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--work", help="where the projects and the tools' homes go (default: a temporary folder)")
    args = parser.parse_args()
    require_binaries("bench/daemons.sh")
    work = args.work or tempfile.mkdtemp(prefix="bench-daemons-")
    tools = [TOOLS[name](work) for name in args.tools]
    for tool in tools:
        tool.generate()
    ended = Forwarder(work, tools, "--daemons", "end")
    kept = Forwarder(work, tools)
    results = {}
    try:
        for tool in tools:
            log(f"{tool.name}: {args.rounds} rounds in {work}")
            samples = results.setdefault(tool.name, [])
            for r in range(args.rounds):
                one_round(tool, ended, kept, r, samples)
    finally:
        ended.stop()
        kept.stop()
    # The kept daemons were ended with the server that kept them.
    left_at_shutdown = {tool.name: bool(tool.daemons()) for tool in tools}
    for tool in tools:
        tool.stop()
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    load = os.getloadavg()[0]
    print(f"Rounds: {args.rounds}; medians; ratio: the median of the per-round ratios against the native second "
          f"build of the same round. Load average at the end: {load:.1f} on {os.cpu_count()} cores.\n")
    print("| tool | first build, native | second build, native (baseline) | second build forwarded, daemon ended "
          "(`--daemons end`) | second build forwarded, daemon kept (default) |")
    print("| --- | --- | --- | --- | --- |")
    for tool in tools:
        samples = results[tool.name]
        cells = []
        for mode in MODES:
            value = statistics.median(s[mode] for s in samples)
            ratio = statistics.median(s[mode] / s["second"] for s in samples)
            cells.append(f"{value:.2f} s" if mode == "second" else f"{value:.2f} s ({ratio:.1f}×)")
        print(f"| {tool.name} | " + " | ".join(cells) + " |")
    print()
    for tool in tools:
        samples = results[tool.name]
        left = sum(1 for s in samples if s["ended_leftover"] or s["ended_warm_leftover"])
        reused = sum(1 for s in samples if s["kept_reused"])
        print(f"{tool.name}: rounds where a daemon was left with `--daemons end`: {left} of {len(samples)}; where the "
              f"kept build used the daemon the server kept: {reused} of {len(samples)}; a daemon left after the "
              f"servers' shutdown: {'yes' if left_at_shutdown[tool.name] else 'no'}")


if __name__ == "__main__":
    main()
