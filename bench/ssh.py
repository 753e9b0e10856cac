#!/usr/bin/env python3
"""ssh-exec's per-call overhead with a warm shared master, side by side with plain ssh over the same master.

Starts its own sshd on 127.0.0.1 and a free port (Debian's openssh-server; keys and configuration in a temporary
folder, as the tests do), warms ssh-exec's master, then times N interleaved runs of

  - `ssh -S <socket> -p PORT -l USER 127.0.0.1 true`     (plain ssh through ssh-exec's own master)
  - `ssh-exec true`                                       (the release binary, same master)

and writes the "SSH: per-call overhead" section of BENCHMARKS.md (replacing an earlier one). Run through
bench/ssh.sh; exits 0 with a "skipped" line when no sshd can run here.
"""
import glob
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUNS = int(os.environ.get("BENCH_SSH_RUNS", "20" if os.environ.get("BENCH_QUICK") == "1" else "200"))
SECTION = "## SSH: per-call overhead (ssh-exec)"


def sshd_binary():
    for path in ("/usr/sbin/sshd", "/usr/local/sbin/sshd"):
        if os.access(path, os.X_OK):
            return path
    return None


def keygen(path):
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "bench", "-f", path], check=True,
                   stdin=subprocess.DEVNULL)


def start_sshd(tmp):
    sshd = sshd_binary()
    if sshd is None:
        return None, "no sshd (install openssh-server)"
    for name in ("host_key", "user_key"):
        keygen(os.path.join(tmp, name))
    shutil.copy(os.path.join(tmp, "user_key.pub"), os.path.join(tmp, "authorized_keys"))
    if os.getuid() == 0:
        os.makedirs("/run/sshd", exist_ok=True)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = os.path.join(tmp, "sshd_config")
    with open(config, "w") as f:
        f.write(f"""Port {port}
ListenAddress 127.0.0.1
HostKey {tmp}/host_key
AuthorizedKeysFile {tmp}/authorized_keys
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PermitRootLogin prohibit-password
PidFile {tmp}/sshd.pid
# Keep the user's ~/.bashrc out of both sides (bash reads it under sshd unless SHLVL is set).
SetEnv SHLVL=1
""")
    result = subprocess.run([sshd, "-f", config, "-E", os.path.join(tmp, "sshd.log")], stdin=subprocess.DEVNULL)
    deadline = time.time() + 10
    while result.returncode == 0 and time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                pass
            pid = int(open(os.path.join(tmp, "sshd.pid")).read())
            host_key = open(os.path.join(tmp, "host_key.pub")).read().split()[:2]
            with open(os.path.join(tmp, "known_hosts"), "w") as f:
                f.write(f"[127.0.0.1]:{port} {' '.join(host_key)}\n")
            return (port, pid), None
        except (OSError, ValueError):
            time.sleep(0.02)
    log = open(os.path.join(tmp, "sshd.log")).read().strip() if os.path.exists(os.path.join(tmp, "sshd.log")) else ""
    return None, f"sshd cannot run here as uid {os.getuid()}: {log}"


def timed(argv, env, cwd):
    start = time.perf_counter_ns()
    code = subprocess.run(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL).returncode
    elapsed = (time.perf_counter_ns() - start) / 1e6
    if code != 0:
        sys.exit(f"bench: {argv[0]} exited {code}")
    return elapsed


def p90(values):
    return sorted(values)[int(len(values) * 0.9)]


def write_section(lines, section=SECTION):
    """Puts `lines` (starting with the `section` heading) at the end of BENCHMARKS.md, replacing an earlier one."""
    path = os.path.join(ROOT, "BENCHMARKS.md")
    text = open(path).read() if os.path.exists(path) else "# Benchmarks\n"
    if section in text:
        start = text.index(section)
        after = text.find("\n## ", start + len(section))
        text = text[:start] + text[after + 1:] if after != -1 else text[:start]
    text = text.rstrip("\n") + "\n\n" + "\n".join(lines) + "\n"
    with open(path, "w") as f:
        f.write(text)


def main():
    ssh_exec = sys.argv[1]
    tmp = tempfile.mkdtemp(prefix="bench-ssh-")
    server = None
    try:
        server, why = start_sshd(tmp)
        if server is None:
            print(f"bench/ssh: skipped: {why}")
            return
        port, _ = server
        user = subprocess.run(["id", "-un"], capture_output=True, text=True, check=True).stdout.strip()
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "SSH_HOST": "127.0.0.1",
            "SSH_PORT": str(port),
            "SSH_USER": user,
            "SSH_KEY_PATH": os.path.join(tmp, "user_key"),
            "SSH_KNOWN_HOSTS": os.path.join(tmp, "known_hosts"),
            "XDG_RUNTIME_DIR": tmp,
        }
        ours = [ssh_exec, "true"]
        for _ in range(20):  # starts and warms the master
            timed(ours, env, tmp)
        sockets = glob.glob(os.path.join(tmp, "ssh-exec", "*.sock"))
        if len(sockets) != 1:
            sys.exit(f"bench: expected one control socket, found {sockets}")
        plain = ["ssh", "-S", sockets[0], "-p", str(port), "-l", user, "127.0.0.1", "true"]
        for _ in range(20):
            timed(plain, env, tmp)
        samples = {"plain": [], "ours": []}
        for i in range(RUNS):
            order = [("plain", plain), ("ours", ours)] if i % 2 == 0 else [("ours", ours), ("plain", plain)]
            for name, argv in order:
                samples[name].append(timed(argv, env, tmp))
        plain_median, ours_median = statistics.median(samples["plain"]), statistics.median(samples["ours"])
        over = ours_median - plain_median
        cpus = os.cpu_count()
        lines = [
            SECTION,
            "",
            f"Measured {time.strftime('%Y-%m-%d')} on {cpus} cores by `bench/ssh.sh` (release build, static as "
            f"shipped): {RUNS} runs each, interleaved, started from Python, against a local sshd (OpenSSH, "
            "127.0.0.1), both through the same warm master connection (ssh-exec's own, `ControlPersist`).",
            "",
            "| command | median | p90 | over plain ssh |",
            "| --- | --- | --- | --- |",
            f"| `ssh -S <socket> host true` | {plain_median:.2f} ms | {p90(samples['plain']):.2f} ms | — |",
            f"| `ssh-exec true` | {ours_median:.2f} ms | {p90(samples['ours']):.2f} ms | {over:+.2f} ms |",
            "",
            f"Goal: within 2 ms of plain ssh at the median: {'met' if over <= 2 else 'NOT met'} ({over:+.2f} ms). "
            "ssh-exec's share: its own start, the master and session-slot checks (a connect and a flock), the "
            "remote script's markers (shell builtins only) and copying the output.",
        ]
        write_section(lines)
        print("\n".join(lines))
    finally:
        if server is not None:
            for path in glob.glob(os.path.join(tmp, "ssh-exec", "*.sock")):
                subprocess.run(["ssh", "-S", path, "-O", "exit", "127.0.0.1"], stderr=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL)
            try:
                os.kill(server[1], signal.SIGTERM)
            except ProcessLookupError:
                pass
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
