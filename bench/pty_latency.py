#!/usr/bin/env python3
"""Keystroke -> echo round trip through a terminal, p50/p99: the anchor for bench P8.

The measuring side is a terminal: it opens a pty pair, starts the program under test on the slave (a session of
its own, the slave as its controlling terminal), writes one byte to the master and times until the echoed byte
comes back, one keystroke at a time.

Cases (all in the same run, so figures compare):
  bare-ld       cat on a local pty, cooked: the kernel's line discipline echoes (the floor: no program in the loop)
  bare-program  `stty raw -echo; exec cat` on a local pty: the program echoes (read + write, as a REPL does)
  ssh-ld        ssh -tt to a private sshd on 127.0.0.1, remote cat cooked: the remote line discipline echoes
  ssh-program   ssh -tt, remote `stty raw -echo; exec cat`: the remote program echoes
  cmd-ld / cmd-program
                any client command given with --client 'CMD …' (e.g. sidecar-exec on a TTY run): it gets
                `sh -c 'printf READY; exec cat'` or `sh -c 'stty raw -echo; printf READY; exec cat'` appended — the
                same two remote programs as for ssh

Pitfall this avoids: a marker typed to find out whether the far side is up is echoed by the *local* line
discipline while ssh is still connecting (the local pty is cooked until ssh makes it raw) — a whole run can then
measure local echo (~6 us) and call it ssh. Each program here prints READY itself once it is in the measured mode.

The sshd is started here with a config of its own in a temporary folder (loopback only, key auth, no PAM) and
stopped at the end; needs openssh-server and openssh-client (`apt-get install -y openssh-server`) and root (or a
user whose key it may authorise). Usage: pty_latency.py [--keys 1000] [--warmup 50] [--cases a,b] [--client CMD]
[--json FILE]
"""

import argparse
import fcntl
import json
import os
import select
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import termios
import time

# Each remote program prints READY once it is in the mode measured; nothing typed can produce that text earlier
# (a cooked local terminal would echo a typed marker itself, before ssh even connected).
LD_ECHO = "printf READY; exec cat"
PROGRAM_ECHO = "stty raw -echo; printf READY; exec cat"


def spawn_on_pty(argv, rows=30, cols=100):
    """Starts argv on a new pty as its controlling terminal; returns (proc, master fd)."""
    master, slave = os.openpty()
    # Window size (TIOCSWINSZ) through the stdlib: termios.tcsetwinsize (3.11+).
    termios.tcsetwinsize(master, (rows, cols))
    proc = subprocess.Popen(
        argv,
        stdin=slave,
        stdout=slave,
        stderr=slave,
        start_new_session=True,  # setsid()
        # The slave becomes the controlling terminal: TIOCSCTTY on fd 0 after setsid (see preexec below).
        preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0),
        close_fds=True,
        env={**os.environ, "TERM": "xterm-256color"},
    )
    os.close(slave)
    return proc, master


def read_until(master, needle, timeout):
    """Reads from master until needle is in what was read; returns it all."""
    buf = b""
    deadline = time.monotonic() + timeout
    while needle not in buf:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"no {needle!r} within {timeout}s; got {buf[-200:]!r}")
        r, _, _ = select.select([master], [], [], left)
        if r:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                raise EOFError(f"pty closed before {needle!r}; got {buf[-200:]!r}")
            if not chunk:
                raise EOFError(f"pty closed before {needle!r}; got {buf[-200:]!r}")
            buf += chunk
    return buf


def wait_ready(master, timeout=20.0):
    """Waits for READY: the program under test is up and in the mode it will be measured in."""
    read_until(master, b"READY", timeout)
    # Drain whatever else is in flight (a second echo, a motd) before measuring.
    while select.select([master], [], [], 0.3)[0]:
        if not os.read(master, 65536):
            break


def measure(master, keys, warmup):
    """One byte out, its echo back, one at a time; returns the round trips in microseconds."""
    alphabet = b"abcdefghijklmnopqrstuvwxyz0123456789"
    samples = []
    typed = 0
    for i in range(warmup + keys):
        key = alphabet[i % len(alphabet) : i % len(alphabet) + 1]
        t0 = time.perf_counter_ns()
        os.write(master, key)
        got = b""
        while key not in got:
            select.select([master], [], [], 5.0)
            chunk = os.read(master, 4096)
            if not chunk:
                raise EOFError("pty closed mid-measurement")
            got += chunk
        t1 = time.perf_counter_ns()
        typed += 1
        # A cooked line discipline holds at most 4095 bytes of a line: end the line now and then (not timed).
        if typed % 500 == 0:
            os.write(master, b"\r")
            time.sleep(0.05)
            while select.select([master], [], [], 0.05)[0]:
                os.read(master, 65536)
        if i >= warmup:
            samples.append((t1 - t0) / 1000.0)
    return samples


def summary(samples):
    s = sorted(samples)

    def pct(p):
        return s[min(len(s) - 1, int(round(p / 100.0 * (len(s) - 1))))]

    return {
        "n": len(s),
        "p50_us": round(pct(50), 1),
        "p90_us": round(pct(90), 1),
        "p99_us": round(pct(99), 1),
        "max_us": round(s[-1], 1),
        "mean_us": round(statistics.fmean(s), 1),
    }


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Sshd:
    """A private sshd on 127.0.0.1 for the run: own host key, own authorized_keys, no PAM."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="pty-latency-sshd-")
        d = self.dir
        self.port = free_port()
        self.key = os.path.join(d, "user_key")
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", os.path.join(d, "host_key")], check=True)
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", self.key], check=True)
        with open(os.path.join(d, "authorized_keys"), "w") as f:
            f.write(open(self.key + ".pub").read())
        config = os.path.join(d, "sshd_config")
        with open(config, "w") as f:
            f.write(
                f"Port {self.port}\nListenAddress 127.0.0.1\nHostKey {d}/host_key\n"
                f"AuthorizedKeysFile {d}/authorized_keys\nPasswordAuthentication no\nUsePAM no\n"
                f"StrictModes no\nPidFile {d}/sshd.pid\nPermitRootLogin prohibit-password\n"
                f"PrintMotd no\nPrintLastLog no\nAcceptEnv TERM\n"
            )
        os.makedirs("/run/sshd", exist_ok=True)
        sshd = "/usr/sbin/sshd"
        subprocess.run([sshd, "-f", config, "-E", os.path.join(d, "sshd.log")], check=True)
        # sshd forks into the background once it listens; wait for its pid file and the port.
        deadline = time.monotonic() + 10
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("sshd did not start; see " + os.path.join(d, "sshd.log"))
                time.sleep(0.05)

    def ssh_argv(self, remote):
        return [
            "ssh", "-tt", "-p", str(self.port), "-i", self.key,
            "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
            "-o", "LogLevel=ERROR", "-o", "ControlMaster=no", "-o", "ControlPath=none",
            f"{os.environ.get('USER', 'root')}@127.0.0.1", remote,
        ]

    def stop(self):
        try:
            pid = int(open(os.path.join(self.dir, "sshd.pid")).read().strip())
            os.kill(pid, signal.SIGTERM)
        except (OSError, ValueError):
            pass
        shutil.rmtree(self.dir, ignore_errors=True)


def run_case(name, argv, keys, warmup):
    proc, master = spawn_on_pty(argv)
    try:
        wait_ready(master)
        samples = measure(master, keys, warmup)
    finally:
        proc.kill()
        proc.wait()
        os.close(master)
    result = {"case": name, **summary(samples)}
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--keys", type=int, default=1000)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--cases", default="bare-ld,bare-program,ssh-ld,ssh-program")
    ap.add_argument("--client", help="a client command line to measure as cmd-ld/cmd-program")
    ap.add_argument("--json", help="write the results here as JSON")
    args = ap.parse_args()
    # A SIGTERM (a timeout around us) still stops the sshd: make it an exception, so `finally` runs.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    cases = args.cases.split(",")
    if args.client:
        cases += ["cmd-ld", "cmd-program"]
    sshd = Sshd() if any(c.startswith("ssh") for c in cases) else None
    results = []
    try:
        for case in cases:
            if case == "bare-ld":
                argv = ["sh", "-c", LD_ECHO]
            elif case == "bare-program":
                argv = ["sh", "-c", PROGRAM_ECHO]
            elif case == "ssh-ld":
                argv = sshd.ssh_argv(LD_ECHO)
            elif case == "ssh-program":
                argv = sshd.ssh_argv(PROGRAM_ECHO)
            elif case == "cmd-ld":
                argv = shlex.split(args.client) + ["sh", "-c", LD_ECHO]
            elif case == "cmd-program":
                argv = shlex.split(args.client) + ["sh", "-c", PROGRAM_ECHO]
            else:
                sys.exit(f"unknown case {case}")
            r = run_case(case, argv, args.keys, args.warmup)
            results.append(r)
            print(
                f"{r['case']:<13} n={r['n']:<5} p50={r['p50_us']:>8.1f} us  p90={r['p90_us']:>8.1f} us  "
                f"p99={r['p99_us']:>8.1f} us  max={r['max_us']:>9.1f} us  mean={r['mean_us']:>8.1f} us",
                flush=True,
            )
    finally:
        if sshd:
            sshd.stop()
    load = os.getloadavg()
    print(f"load average at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} cores")
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump({"results": results, "loadavg": load}, f, indent=1)


if __name__ == "__main__":
    main()
