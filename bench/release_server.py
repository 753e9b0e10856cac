"""A release exec-server on a free loopback port, for bench.py and faults.py (imported, not run)."""

import atexit
import collections
import http.client
import os
import subprocess
import threading

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("BENCH_BIN_DIR") or os.path.join(ROOT, "target", "release")
SERVER = os.path.join(BIN, "exec-server")
CLIENT = os.path.join(BIN, "sidecar-exec")
MiB = 1024 * 1024
RUNNING = []  # every process started here, killed at exit whatever happens


@atexit.register
def stop_everything():
    for proc in RUNNING:
        if proc.poll() is None:
            proc.kill()


def require_binaries(script):
    for binary in (SERVER, CLIENT):
        if not os.path.exists(binary):
            raise SystemExit(f"{binary} is missing: run {script} (it builds the release binaries)")


class Server:
    """Ready when its own 'listening' log line (which names the port) appears; its log is drained after that, the
    last 256 lines kept in `log` (bench/p6.py reads each command's `duration_ms` from them)."""

    def __init__(self, workspace, *args, env=None, preexec_fn=None):
        self.proc = subprocess.Popen(
            [SERVER, "--host", "127.0.0.1", "--port", "0", "--cwd", workspace, "--log", "info", *args],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, preexec_fn=preexec_fn)
        RUNNING.append(self.proc)
        for line in self.proc.stderr:
            if "exec-server listening" in line:
                self.port = int(line.split("127.0.0.1:")[1].split()[0])
                break
        else:
            raise RuntimeError("exec-server did not start")
        self.log = collections.deque(maxlen=256)
        threading.Thread(target=lambda: self.log.extend(self.proc.stderr), daemon=True).start()
        self.url = f"http://127.0.0.1:{self.port}"

    def status(self, field):
        """A /proc/PID/status field in bytes (VmRSS, VmHWM)."""
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
        return 0

    def fds(self):
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))

    def healthy(self):
        try:
            conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
            conn.request("GET", "/health")
            return conn.getresponse().status == 200
        except OSError:
            return False

    def post(self, path, body, headers=None, timeout=60):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        conn.request("POST", path, body, headers or {"Content-Type": "application/json"})
        response = conn.getresponse()
        return response.status, response.read()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=30)
