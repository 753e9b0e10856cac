#!/usr/bin/env python3
"""The fault and abuse suite: counted results, not impressions. Runs the release exec-server and sidecar-exec.

  bench/faults.sh            (builds, then runs this; about 2 minutes on 2 cores)

Every check prints its counts; the run exits 1 if any check failed. Standard library only.
"""

import base64
import http.client
import json
import os
import random
import resource
import signal
import socket
import subprocess
import struct
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from release_server import CLIENT, MiB, RUNNING, Server, require_binaries

FAILURES = []
CHECKED = []


def check(name, ok, detail):
    print(f"{'ok  ' if ok else 'FAIL'} {name}: {detail}", flush=True)
    CHECKED.append(name)
    if not ok:
        FAILURES.append(name)


def processes_with(marker):
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ")
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker.encode() in cmdline and state != "Z":
            found.append(int(pid))
    return found


def wait_gone(marker, within):
    deadline = time.time() + within
    while time.time() < deadline:
        if not processes_with(marker):
            return []
        time.sleep(0.05)
    return processes_with(marker)


def raw_request(port, data, read=True):
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.sendall(data)
    if not read:
        return sock
    chunks = []
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            break
        chunks.append(chunk)
    sock.close()
    return b"".join(chunks)


def http_bytes(method, path, body=b"", headers=()):
    head = [f"{method} {path} HTTP/1.1", "Host: faults", "Connection: close", f"Content-Length: {len(body)}", *headers]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def abuse(tmp):
    """1000 mixed timeouts, cancels (client killed), disconnects and setsid escapes; then count what is left. The
    client names its runs (for resume), so a run whose client was killed with SIGKILL lives on for the reattach window:
    1 s here, so that its end is part of what is counted."""
    workspace = os.path.join(tmp, "abuse")
    os.makedirs(workspace)
    server = Server(workspace, "--grace", "0.3", "--reattach-window", "1")
    marker = f"4242.{os.getpid()}"
    sleeper = f"sleep {marker}"
    env = {"PATH": os.environ["PATH"], "BUILD_SIDECARS": json.dumps({"python": {"internal_url": server.url}}),
           "SIDECAR_CWD": workspace}
    kinds = ["timeout", "cancel", "disconnect", "setsid"]
    counts = {kind: 0 for kind in kinds}
    errors = []

    def one(i):
        kind = kinds[i % len(kinds)]
        counts[kind] += 1
        try:
            if kind == "timeout":
                script = f"trap '' TERM; ({sleeper} &); {sleeper}"
                status, body = server.post("/exec", json.dumps({"cmd": ["sh", "-c", script], "timeout": 1}))
                if status != 200 or json.loads(body)["exit_code"] != 124:
                    errors.append(f"timeout: {status} {body[:200]!r}")
            elif kind == "cancel":
                script = f"echo up; trap '' TERM; ({sleeper} &); {sleeper}"
                proc = subprocess.Popen([CLIENT, "python", "sh", "-c", script], env=dict(env, SIDECAR_STREAM="1"),
                                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
                proc.stdout.readline()
                proc.kill()
                proc.wait()
            elif kind == "disconnect":
                body = json.dumps({"cmd": ["sh", "-c", f"echo up; ({sleeper} &); {sleeper}"]}).encode()
                sock = raw_request(server.port, http_bytes("POST", "/exec/stream", body), read=False)
                sock.recv(4096)
                sock.close()
            else:
                script = f"setsid sh -c \"trap '' TERM; {sleeper}\" >/dev/null 2>&1 & echo started"
                status, body = server.post("/exec", json.dumps({"cmd": ["sh", "-c", script]}))
                if status != 200 or json.loads(body)["exit_code"] != 0:
                    errors.append(f"setsid: {status} {body[:200]!r}")
        except Exception as err:  # noqa: BLE001 - counted and reported below
            errors.append(f"{kind}: {err!r}")

    started = time.time()
    with ThreadPoolExecutor(max_workers=24) as pool:
        list(pool.map(one, range(1000)))
    left = wait_gone(marker, 10)
    check("abuse", not left and not errors and server.healthy(),
          f"1000 operations in {time.time() - started:.1f} s ({', '.join(f'{n} {k}' for k, n in counts.items())}); "
          f"processes left: {len(left)}; errors: {len(errors)} {errors[:3]}; server healthy: {server.healthy()}")
    server.stop()


def sequential(tmp):
    """10 000 sequential commands: open fds and RSS of the server before and after."""
    workspace = os.path.join(tmp, "sequential")
    os.makedirs(workspace)
    server = Server(workspace)
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    body = json.dumps({"cmd": ["sh", "-c", "echo out; echo err >&2"]})
    for _ in range(100):  # warm-up: allocator pools and thread stacks settle
        conn.request("POST", "/exec", body, {"Content-Type": "application/json"})
        conn.getresponse().read()
    time.sleep(0.3)
    fds_before, rss_before = server.fds(), server.status("VmRSS")
    bad = 0
    for _ in range(10_000):
        conn.request("POST", "/exec", body, {"Content-Type": "application/json"})
        reply = json.loads(conn.getresponse().read())
        bad += reply["exit_code"] != 0 or reply["output"] != "out\n"
    conn.close()
    time.sleep(0.5)
    fds_after, rss_after = server.fds(), server.status("VmRSS")
    check("10 000 sequential commands", bad == 0 and fds_after <= fds_before and rss_after - rss_before < 4 * MiB,
          f"wrong replies: {bad}; fds {fds_before} -> {fds_after}; RSS {rss_before / MiB:.1f} -> {rss_after / MiB:.1f} MiB")
    server.stop()


def sigterm_with_50_running(tmp):
    """SIGTERM to the server with 50 commands running (half ignore SIGTERM): all gone within grace + 1 s."""
    workspace = os.path.join(tmp, "sigterm")
    os.makedirs(workspace)
    grace = 1.0
    server = Server(workspace, "--grace", str(grace))
    marker = f"4343.{os.getpid()}"
    socks = []
    for i in range(50):
        trap = "trap '' TERM;" if i % 2 else ""
        script = f"{trap} echo up; (sleep {marker} &); sleep {marker}"
        body = json.dumps({"cmd": ["sh", "-c", script]}).encode()
        sock = raw_request(server.port, http_bytes("POST", "/exec/stream", body), read=False)
        sock.recv(4096)
        socks.append(sock)
    running = len(processes_with(marker))
    started = time.time()
    server.proc.send_signal(signal.SIGTERM)
    server.proc.wait(timeout=30)
    took = time.time() - started
    left = processes_with(marker)
    for sock in socks:
        sock.close()
    check("SIGTERM with 50 running", took <= grace + 1 and not left and server.proc.returncode == 0,
          f"{running} processes running before; exit {server.proc.returncode} after {took:.2f} s "
          f"(limit {grace + 1:.1f} s); processes left: {len(left)}")


def cut_reply(kept):
    """A cut /exec output: (head, bytes dropped, tail), from its in-place marker; (kept, 0, b"") when not cut."""
    marker_open, marker_close = "\n[\u2026 ".encode(), " bytes dropped \u2026]\n".encode()
    at = kept.find(marker_open)
    if at < 0:
        return kept, 0, b""
    end = kept.index(marker_close, at)
    return kept[:at], int(kept[at + len(marker_open):end]), kept[end + len(marker_close):]


def floods(tmp):
    """10 GB through /exec, and a stream whose reader stops reading."""
    workspace = os.path.join(tmp, "floods")
    os.makedirs(workspace)
    server = Server(workspace)
    started = time.time()
    status, body = server.post("/exec", json.dumps({"cmd": ["sh", "-c", "head -c 10000000000 /dev/zero"],
                                                     "timeout": 600}), timeout=600)
    reply = json.loads(body)
    peak = server.status("VmHWM")
    head, dropped, tail = cut_reply(reply["output"].encode())
    check("10 GB through /exec", status == 200 and reply["exit_code"] == 0 and reply["output_truncated"]
          and not head.strip(b"\0") and not tail.strip(b"\0") and len(head) + dropped + len(tail) == 10**10
          and 16 * MiB - 100 <= 6 * (len(head) + len(tail)) <= 16 * MiB and peak < 200 * MiB and server.healthy(),
          f"{time.time() - started:.1f} s; exit {reply['exit_code']}; kept {len(reply['output']) / MiB:.1f} MiB "
          f"(head {len(head)} + tail {len(tail)} NULs, {dropped} dropped between; a NUL is 6 bytes escaped: "
          f"--max-output counts them), "
          f"truncated {reply['output_truncated']}; peak server RSS {peak / MiB:.0f} MiB; healthy {server.healthy()}")

    marker = f"4444.{os.getpid()}"
    body = json.dumps({"cmd": ["sh", "-c", f"yes {marker}"]}).encode()
    sock = raw_request(server.port, http_bytes("POST", "/exec/stream", body), read=False)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    sock.recv(1024)
    time.sleep(3)
    pids = processes_with(marker)
    cpu_before = sum(cpu_ticks(pid) for pid in pids)
    rss_during = server.status("VmRSS")
    time.sleep(1)
    cpu_after = sum(cpu_ticks(pid) for pid in processes_with(marker))
    blocked = cpu_after - cpu_before <= 5  # ticks of 10 ms: the writer is asleep in write(2)
    sock.close()
    left = wait_gone(marker, 10)
    check("stalled stream reader", blocked and rss_during < 100 * MiB and not left and server.healthy(),
          f"command blocked: {blocked} ({cpu_after - cpu_before} CPU ticks in 1 s); server RSS "
          f"{rss_during / MiB:.1f} MiB; after disconnect processes left: {len(left)}")
    server.stop()


def cpu_ticks(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])
    except OSError:
        return 0


def bad_inputs(tmp):
    """A corpus of bad requests: each gets the right 4xx with a JSON message, nothing runs, the server keeps serving."""
    workspace = os.path.join(tmp, "bad")
    os.makedirs(workspace)
    os.symlink("/", os.path.join(workspace, "escape"))
    canary = os.path.join(workspace, "canary")
    server = Server(workspace, "--max-concurrent", "64", env=dict(os.environ, EXEC_SERVER_TOKEN="right-token"))
    auth = ("Authorization: Bearer right-token",)
    touch = ["touch", canary]

    def body(value):
        return json.dumps(value).encode()

    corpus = [
        ("malformed JSON", "POST", "/exec", b"{cmd: [touch]}", auth, 400),
        ("truncated JSON", "POST", "/exec", body({"cmd": touch})[:-3], auth, 400),
        ("empty body", "POST", "/exec", b"", auth, 400),
        ("JSON null", "POST", "/exec", b"null", auth, 400),
        ("JSON array", "POST", "/exec", body([touch]), auth, 400),
        ("cmd a string", "POST", "/exec", body({"cmd": "touch x"}), auth, 400),
        ("cmd null", "POST", "/exec", body({"cmd": None}), auth, 400),
        ("cmd of numbers", "POST", "/exec", body({"cmd": [1, 2]}), auth, 400),
        ("cmd empty", "POST", "/exec", body({"cmd": []}), auth, 400),
        ("program empty", "POST", "/exec", body({"cmd": [""]}), auth, 400),
        ("timeout a string", "POST", "/exec", body({"cmd": touch, "timeout": "5"}), auth, 400),
        ("timeout huge", "POST", "/exec", b'{"cmd": ["touch", "x"], "timeout": 1e400}', auth, 400),
        ("timeout beyond i64", "POST", "/exec", b'{"cmd": ["touch", "x"], "timeout": 99999999999999999999}', auth, 400),
        ("timeout a float", "POST", "/exec", body({"cmd": touch, "timeout": 1.5}), auth, 400),
        ("env a list", "POST", "/exec", body({"cmd": touch, "env": ["A=1"]}), auth, 400),
        ("env value a number", "POST", "/exec", body({"cmd": touch, "env": {"A": 1}}), auth, 400),
        ("env name with =", "POST", "/exec", body({"cmd": touch, "env": {"A=B": "1"}}), auth, 400),
        ("env name empty", "POST", "/exec", body({"cmd": touch, "env": {"": "1"}}), auth, 400),
        ("NUL in cmd", "POST", "/exec", body({"cmd": ["touch", canary + "\0x"]}), auth, 400),
        ("NUL in env", "POST", "/exec", body({"cmd": touch, "env": {"A": "a\0b"}}), auth, 400),
        ("NUL in cwd", "POST", "/exec", body({"cmd": touch, "cwd": "a\0b"}), auth, 400),
        ("invalid UTF-8 in cmd", "POST", "/exec", b'{"cmd": ["touch", "\xff\xfe"]}', auth, 400),
        ("invalid UTF-8 in env", "POST", "/exec", b'{"cmd": ["touch", "x"], "env": {"A": "\xc3"}}', auth, 400),
        ("invalid UTF-8 in cwd", "POST", "/exec", b'{"cmd": ["touch", "x"], "cwd": "\xe2\x82"}', auth, 400),
        ("lone surrogate", "POST", "/exec", b'{"cmd": ["touch", "\\ud800"]}', auth, 400),
        ("cwd ..", "POST", "/exec", body({"cmd": touch, "cwd": ".."}), auth, 400),
        ("cwd /etc", "POST", "/exec", body({"cmd": touch, "cwd": "/etc"}), auth, 400),
        ("cwd via symlink", "POST", "/exec", body({"cmd": touch, "cwd": "escape/tmp"}), auth, 400),
        ("cwd ../ missing", "POST", "/exec", body({"cmd": touch, "cwd": "../nowhere"}), auth, 400),
        ("stdin_b64 not base64", "POST", "/exec", body({"cmd": touch, "stdin_b64": "!!"}), auth, 400),
        ("2 MiB body", "POST", "/exec", body({"cmd": touch, "stdin": "x" * (2 * MiB)}), auth, 413),
        ("2 MiB stream body", "POST", "/exec/stream", body({"cmd": touch, "stdin": "x" * (2 * MiB)}), auth, 413),
        ("no Authorization", "POST", "/exec", body({"cmd": touch}), (), 401),
        ("wrong token", "POST", "/exec", body({"cmd": touch}), ("Authorization: Bearer wrong",), 401),
        ("token prefix", "POST", "/exec", body({"cmd": touch}), ("Authorization: Bearer right",), 401),
        ("token longer", "POST", "/exec", body({"cmd": touch}), ("Authorization: Bearer right-token-2",), 401),
        ("Basic scheme", "POST", "/exec", body({"cmd": touch}), ("Authorization: Basic right-token",), 401),
        ("scheme only", "POST", "/exec", body({"cmd": touch}), ("Authorization: Bearer",), 401),
        ("no scheme", "POST", "/exec", body({"cmd": touch}), ("Authorization: right-token",), 401),
        ("binary header", "POST", "/exec", body({"cmd": touch}), ("Authorization: Bearer \xff".encode("latin-1").decode("latin-1"),), 401),
        ("info without token", "GET", "/info", b"", (), 401),
        ("unknown path", "GET", "/nope", b"", auth, 404),
        ("unknown path POST", "POST", "/exec/nope", body({"cmd": touch}), auth, 404),
        ("GET /exec", "GET", "/exec", b"", auth, 405),
        ("DELETE /exec", "DELETE", "/exec", b"", auth, 405),
        ("PUT /exec/stream", "PUT", "/exec/stream", body({"cmd": touch}), auth, 405),
    ]
    wrong = []
    for name, method, path, payload, headers, expected in corpus:
        response = raw_request(server.port, http_bytes(method, path, payload, headers))
        status = int(response.split(b" ", 2)[1])
        payload_json = response.split(b"\r\n\r\n", 1)[1]
        try:
            message = json.loads(payload_json)["error"]
        except (ValueError, KeyError, TypeError):
            message = None
        if status != expected or not message:
            wrong.append(f"{name}: {status} {payload_json[:120]!r}")

    # Property-based: random mutations of a valid request (truncations, byte flips, insertions) must each get 200
    # or a 4xx with a JSON message, never a 5xx or a dropped connection. They run only `false`.
    rng = random.Random(7)
    base = body({"cmd": ["false"], "cwd": ".", "timeout": 5, "env": {"A": "1"}, "stdin": "x"})
    statuses = {}
    for _ in range(1500):
        mutated = bytearray(base)
        for _ in range(rng.randint(1, 4)):
            op = rng.random()
            position = rng.randrange(len(mutated) + 1)
            if op < 0.3 and len(mutated) > 1:
                del mutated[position:]
            elif op < 0.6 and position < len(mutated):
                mutated[position] = rng.randrange(256)
            else:
                mutated[position:position] = bytes([rng.randrange(256)])
        response = raw_request(server.port, http_bytes("POST", "/exec", bytes(mutated), auth))
        status = int(response.split(b" ", 2)[1]) if response else 0
        statuses[status] = statuses.get(status, 0) + 1
        if status != 200:
            try:
                ok = isinstance(json.loads(response.split(b"\r\n\r\n", 1)[1])["error"], str) and 400 <= status < 500
            except (ValueError, KeyError, TypeError, IndexError):
                ok = False
            if not ok:
                wrong.append(f"mutation {bytes(mutated)[:80]!r}: {response[:120]!r}")
    check("bad-input corpus", not wrong and not os.path.exists(canary) and server.healthy(),
          f"{len(corpus)} crafted requests and 1500 random mutations (statuses {dict(sorted(statuses.items()))}); "
          f"wrong answers: {len(wrong)} {wrong[:3]}; a command ran: {os.path.exists(canary)}; healthy: {server.healthy()}")
    server.stop()


def zombie_children(pid):
    """Pids of the <defunct> children of pid."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                state, ppid = f.read().rsplit(")", 1)[1].split()[:2]
        except (OSError, ValueError):
            continue
        if state == "Z" and int(ppid) == pid:
            found.append(int(entry))
    return found


def adopted_zombies(tmp):
    """50 requests whose setsid escapees exit by themselves (found by their tag or not): the server, their
    subreaper, reaps them all (before: 19 <defunct> after 50 requests, still there 20 s later)."""
    workspace = os.path.join(tmp, "zombies")
    os.makedirs(workspace)
    server = Server(workspace)
    marker = f"4545.{os.getpid()}"
    script = (f"setsid sh -c ': {marker}' & setsid env -i /bin/sh -c '/bin/sleep 0.2; : {marker}' & "
              f"setsid sh -c 'sleep 0.1; : {marker}' >/dev/null 2>&1 & echo ok")
    bad = 0
    for _ in range(50):
        status, body = server.post("/exec", json.dumps({"cmd": ["sh", "-c", script]}))
        bad += status != 200 or json.loads(body)["exit_code"] != 0
    left = wait_gone(marker, 10)
    deadline = time.time() + 5
    while zombie_children(server.proc.pid) and time.time() < deadline:
        time.sleep(0.05)
    zombies = zombie_children(server.proc.pid)
    check("adopted escapees are reaped", not zombies and not left and bad == 0 and server.healthy(),
          f"50 requests with 150 escapees that exit by themselves; failed requests: {bad}; escapees still running: "
          f"{len(left)}; <defunct> children of the server 5 s later: {len(zombies)}")
    server.stop()


def cwd_swap_race(tmp):
    """A checked cwd swapped for a symlink to outside the workspace, over and over, while 1500 commands start:
    none may run outside (before: 362 of 1500 did)."""
    workspace = os.path.join(tmp, "race")
    outside = os.path.join(tmp, "race-outside")
    os.makedirs(os.path.join(workspace, "d"))
    os.makedirs(outside)
    server = Server(workspace)
    swapper = subprocess.Popen([sys.executable, "-c", f"""
import os
os.chdir({workspace!r})
while True:
    os.rename("d", "held"); os.symlink({outside!r}, "d"); os.unlink("d"); os.rename("held", "d")
"""])
    RUNNING.append(swapper)
    counts = {"inside": 0, "outside": 0, "refused": 0}
    try:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        for _ in range(1500):
            conn.request("POST", "/exec", json.dumps({"cmd": ["pwd", "-P"], "cwd": "d"}),
                         {"Content-Type": "application/json"})
            response = conn.getresponse()
            body = response.read()
            reply = json.loads(body) if response.status == 200 else {}
            if reply.get("exit_code") != 0:
                counts["refused"] += 1
            elif reply["output"].startswith(os.path.realpath(workspace) + "/"):
                counts["inside"] += 1
            else:
                counts["outside"] += 1
        conn.close()
    finally:
        swapper.kill()
        swapper.wait()
    check("cwd swapped for a symlink", counts["outside"] == 0 and counts["inside"] > 0 and server.healthy(),
          f"1500 commands while the cwd was swapped: {counts['inside']} ran inside, {counts['refused']} refused "
          f"(escape or missing), {counts['outside']} ran outside the workspace")
    server.stop()


def wait_catching(pid, signum, within=10):
    """Waits until process `pid` has a handler for `signum` (SigCgt), so that the signal tests its handling and not
    its default action."""
    deadline = time.time() + within
    while time.time() < deadline:
        with open(f"/proc/{pid}/status") as f:
            caught = int(next(line for line in f if line.startswith("SigCgt:")).split()[1], 16)
        if caught & (1 << (signum - 1)):
            return
        time.sleep(0.01)
    raise RuntimeError(f"process {pid} installed no handler for signal {signum}")


def ipc_hostile_files(tmp):
    """File-IPC requests an agent should never write: FIFOs (plain and behind symlinks), symlinks to /dev/zero,
    10 GiB sparse files, symlinks planted at the old temporary result names, ids as long as a name allows. Every
    hostile file gets exactly one error result and nothing waits on it; the others are answered; memory stays small;
    done and SIGTERM still end the server."""
    root = os.path.join(tmp, "ipc-hostile")
    tools, workspace = os.path.join(root, "ipc", "tools"), os.path.join(root, "workspace")
    os.makedirs(tools)
    os.makedirs(workspace)
    canary = os.path.join(root, "canary")
    with open(canary, "w") as f:
        f.write("canary\n")
    pipe = os.path.join(root, "pipe")
    os.mkfifo(pipe)
    server = Server(workspace, "--ipc-dir", tools, "--grace", "0.3")
    # A guard for a broken build: it fails on its own instead of taking the machine's memory.
    resource.prlimit(server.proc.pid, resource.RLIMIT_AS, (2 << 30, 2 << 30))

    def request_path(name):
        return os.path.join(tools, f"exec-request-{name}.json")

    def write_request(name, command):
        with open(request_path(name), "w") as f:
            json.dump({"command": command}, f)

    n = 25
    hostile = {"fifo": "is a FIFO", "fifolink": "is a symbolic link", "zero": "is a symbolic link",
               "sparse": "is larger than 1048576 bytes"}
    expected = {}  # result id -> (exit code, text its stdout or stderr must hold)
    for i in range(n):
        os.mkfifo(request_path(f"fifo{i}"))
        os.symlink(pipe, request_path(f"fifolink{i}"))
        os.symlink("/dev/zero", request_path(f"zero{i}"))
        with open(request_path(f"sparse{i}"), "wb") as f:
            f.truncate(10 << 30)
        for kind, why in hostile.items():
            expected[f"{kind}{i}"] = (2, why)
        os.symlink(canary, os.path.join(tools, f".exec-result-planted{i}.json.tmp"))
        write_request(f"planted{i}", "echo planted")
        expected[f"planted{i}"] = (0, "planted")
        write_request(f"ok{i}", f"echo ok{i}")
        expected[f"ok{i}"] = (0, f"ok{i}")
    for length in (234, 237):
        write_request("i" * length, f"echo long{length}")
        expected["i" * length] = (0, f"long{length}")

    def result_path(name):
        return os.path.join(tools, f"exec-result-{name}.json")

    started = time.time()
    deadline = started + 60
    while time.time() < deadline and not all(os.path.exists(result_path(name)) for name in expected):
        time.sleep(0.05)
    took = time.time() - started
    right, wrong = 0, []
    for name, (code, text) in expected.items():
        try:
            with open(result_path(name)) as f:
                result = json.load(f)
        except (OSError, ValueError) as err:
            wrong.append(f"{name[:20]}: {err}")
            continue
        if result["exitCode"] == code and text in result["stdout" if code == 0 else "stderr"]:
            right += 1
        else:
            wrong.append(f"{name[:20]}: {result}")
    hostile_results = [result_path(name) for name, (code, _) in expected.items() if code == 2]
    stamps = {path: os.stat(path).st_mtime_ns for path in hostile_results if os.path.exists(path)}
    time.sleep(6)  # past the 5 s full rescan of the folder: nothing may be read or answered again
    rewritten = sum(1 for path, stamp in stamps.items() if os.stat(path).st_mtime_ns != stamp)
    peak = server.status("VmHWM")
    with open(canary) as f:
        canary_intact = f.read() == "canary\n"
    healthy = server.healthy()
    check("file-IPC hostile requests", right == len(expected) and rewritten == 0 and canary_intact
          and peak < 64 * MiB and healthy,
          f"{right}/{len(expected)} right results ({4 * n} hostile, {n} planted temporaries, {n} plain, 2 long ids) "
          f"in {took:.2f} s; wrong {len(wrong)} {wrong[:2]}; answered again after a rescan: {rewritten}; canary "
          f"intact: {canary_intact}; peak RSS {peak / MiB:.1f} MiB; HTTP healthy: {healthy}")

    with open(os.path.join(root, "ipc", "done"), "w"):
        pass
    started = time.time()
    try:
        code = server.proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        code = None
        server.proc.kill()
    check("done with hostile requests present", code == 0,
          f"exit {code} after {time.time() - started:.2f} s (limit 10 s)")

    # SIGTERM while FIFOs wait in a fresh folder: the first sweep meets them before the signal is looked at.
    tools = os.path.join(root, "again", "tools")
    os.makedirs(tools)
    for i in range(n):
        os.mkfifo(request_path(f"fifo{i}"))
        os.symlink(pipe, request_path(f"fifolink{i}"))
    server = Server(workspace, "--ipc-dir", tools, "--grace", "0.3")
    wait_catching(server.proc.pid, signal.SIGTERM)
    # Sent again every half second: one that comes in the instant the handler is installed can go unseen by tokio,
    # and a server that does not act on SIGTERM never exits however many it gets.
    started, sent, code = time.time(), 0, None
    while code is None and time.time() - started < 10:
        server.proc.send_signal(signal.SIGTERM)
        sent += 1
        try:
            code = server.proc.wait(timeout=0.5)
        except subprocess.TimeoutExpired:
            pass
    if code is None:
        server.proc.kill()
    check("SIGTERM with FIFO requests present", code == 0,
          f"{2 * n} FIFO requests; exit {code} after {time.time() - started:.2f} s and {sent} SIGTERM (limit 10 s)")


def read_reply(sock):
    """The status and body of an HTTP response on a socket already sent its request (chunked or not)."""
    response = http.client.HTTPResponse(sock)
    response.begin()
    return response.status, response.read()


def running_commands(server):
    """/info's "running", or -1 when /info does not answer."""
    try:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
        conn.request("GET", "/info")
        response = conn.getresponse()
        return json.loads(response.read()).get("running", -1) if response.status == 200 else -1
    except OSError:
        return -1


def unread_replies(tmp):
    """Eight /exec of 16 MiB of \\x01 (stdout) and 16 MiB of \\xff (stderr) whose clients read nothing for 10 s:
    the server's peak RSS stays under 200 MiB, the replies are exact heads and tails flagged as cut, and /info counts the
    replies still unsent as running (before: one such reply was ~200 MB, eight peaked at 1.4 GiB, "running": 0)."""
    workspace = os.path.join(tmp, "unread")
    os.makedirs(workspace)
    server = Server(workspace)
    script = "head -c 16777216 /dev/zero | tr '\\0' '\\001'; head -c 16777216 /dev/zero | tr '\\0' '\\377' >&2"
    body = json.dumps({"cmd": ["sh", "-c", script]}).encode()
    socks = [raw_request(server.port, http_bytes("POST", "/exec", body), read=False) for _ in range(8)]
    started = time.time()
    running = []
    while time.time() - started < 10:
        time.sleep(0.5)
        running.append(running_commands(server))
    peak = server.status("VmHWM")
    wrong, sizes = [], []
    for sock in socks:
        try:
            sock.settimeout(120)
            status, payload = read_reply(sock)
            sizes.append(len(payload))
            reply = json.loads(payload)
            stdout = cut_reply(reply["output"].encode())
            stderr = cut_reply(base64.b64decode(reply.get("stderr_b64") or ""))
            ends = [(stdout[0], b"\x01"), (stdout[2], b"\x01"), (stderr[0], b"\xff"), (stderr[2], b"\xff")]
            exact = all(part and not part.strip(byte) for part, byte in ends)
            if (status != 200 or reply["exit_code"] != 0 or not reply["output_truncated"]
                    or not reply["stderr_truncated"] or not exact
                    or stdout[1] + len(stdout[0]) + len(stdout[2]) != 16 * MiB):
                wrong.append(f"{status} exit {reply.get('exit_code')} stdout {len(stdout[0])}+{len(stdout[2])} "
                             f"stderr {len(stderr[0])}+{len(stderr[2])}")
        except Exception as err:  # noqa: BLE001 - counted and reported below
            wrong.append(repr(err))
        sock.close()
    time.sleep(0.5)
    after = running_commands(server)
    check("eight unread 16 MiB /exec replies", peak < 200 * MiB and not wrong and max(running) == 8 and after == 0,
          f"peak server RSS {peak / MiB:.0f} MiB (bound 200 MiB); replies {min(sizes, default=0) / MiB:.1f}-"
          f"{max(sizes, default=0) / MiB:.1f} MiB each; wrong: {len(wrong)} {wrong[:2]}; /info running while "
          f"unread: {max(running)}, after: {after}; healthy {server.healthy()}")
    server.stop()


def connection_limits(tmp):
    """2000 idle connections, then 200 slowloris ones (a header byte a second), against a server started with a
    low open-file limit (soft 256, hard 1024) and --max-concurrent 32: /health and 32 concurrent commands still
    work (the connection cap leaves descriptors for them; new connections push out the longest idle ones),
    slowloris connections are closed after --header-timeout, idle ones after --idle-timeout, the soft limit was
    raised to the hard one (before: connections were never closed, /health timed out, commands failed with
    "Too many open files"). The descriptors of the 32 commands stay free: the server holds at most its limit less
    8 per command (that it holds at most its limit is no check: no process can hold more)."""
    import resource
    import select
    import threading

    def readable(socks, timeout):
        """The sockets of `socks` with something to read (or closed), waiting up to `timeout` s (poll: fds > 1024)."""
        poller, by_fd = select.poll(), {sock.fileno(): sock for sock in socks}
        for fd in by_fd:
            poller.register(fd, select.POLLIN)
        return [by_fd[fd] for fd, _ in poller.poll(timeout * 1000)]

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 2600 and (hard == resource.RLIM_INFINITY or hard >= 2600):
        resource.setrlimit(resource.RLIMIT_NOFILE, (2600, hard))
    workspace = os.path.join(tmp, "connections")
    os.makedirs(workspace)
    header_timeout, idle_timeout = 2, 6
    server = Server(workspace, "--max-concurrent", "32", "--header-timeout", str(header_timeout),
                    "--idle-timeout", str(idle_timeout),
                    preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (256, 1024)))
    with open(f"/proc/{server.proc.pid}/limits") as f:
        limit = next(line.split()[3] for line in f if line.startswith("Max open files"))

    idle = []
    for _ in range(2000):
        try:
            idle.append(socket.create_connection(("127.0.0.1", server.port), timeout=5))
        except OSError:
            break
    time.sleep(0.5)
    slow, slow_closed, stop = [], {}, threading.Event()
    for _ in range(200):
        try:
            sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: faults\r\nX-Slow: ")
        except OSError:
            break
        slow.append((sock, time.time()))

    def drip():
        while not stop.is_set():
            for sock, opened in slow:
                if sock not in slow_closed:
                    try:
                        sock.send(b"a")
                    except OSError:
                        slow_closed[sock] = (time.time() - opened, b"")
            for sock in readable([s for s, _ in slow if s not in slow_closed], 1):
                try:
                    data = sock.recv(4096)
                except OSError:
                    data = b""
                slow_closed[sock] = (time.time() - dict(slow)[sock], data)

    dripper = threading.Thread(target=drip, daemon=True)
    dripper.start()
    time.sleep(0.5)
    health_started = time.time()
    healthy = server.healthy()
    health_took = time.time() - health_started
    results = []

    def one(i):
        try:
            status, body = server.post("/exec", json.dumps({"cmd": ["sh", "-c", f"sleep 1; echo {i}"]}), timeout=30)
            reply = json.loads(body)
            return status == 200 and reply["exit_code"] == 0 and reply["output"] == f"{i}\n", reply.get("error")
        except Exception as err:  # noqa: BLE001 - counted and reported below
            return False, repr(err)

    with ThreadPoolExecutor(max_workers=32) as pool:
        results = list(pool.map(one, range(32)))
    fds = server.fds()
    # Every slowloris connection is closed within the header timeout (plus margin for a loaded machine).
    deadline = time.time() + header_timeout + 10
    while len(slow_closed) < len(slow) and time.time() < deadline:
        time.sleep(0.1)
    stop.set()
    dripper.join()
    slow_408 = sum(1 for _, data in slow_closed.values() if data.startswith(b"HTTP/1.1 408"))
    slow_late = sum(1 for took, _ in slow_closed.values() if took > header_timeout + 10)
    # Idle connections: pushed out by newer ones or closed after the idle timeout.
    deadline = time.time() + idle_timeout + 10
    open_idle = list(idle)
    while open_idle and time.time() < deadline:
        for sock in readable(open_idle, 0.5):
            try:
                sock.recv(1)
            except OSError:
                pass
            open_idle.remove(sock)
    for sock in idle + [s for s, _ in slow]:
        sock.close()
    failed = [error for ok, error in results if not ok]
    check("2000 idle and 200 slowloris connections", healthy and not failed and len(slow) == 200
          and len(slow_closed) == len(slow)
          and not slow_late and not open_idle and limit == "1024" and fds + 32 * 8 <= int(limit),
          f"{len(idle)} idle connections opened, {len(idle) - len(open_idle)} closed by the server; slowloris opened: "
          f"{len(slow)}, closed: "
          f"{len(slow_closed)} ({slow_408} with a 408, {slow_late} late); /health {healthy} in "
          f"{health_took:.2f} s; 32 concurrent commands: {len(results) - len(failed)} ok {failed[:2]}; server fds "
          f"{fds} (at most {int(limit) - 32 * 8}), soft limit {limit}; healthy after: {server.healthy()}")
    server.stop()


# Each scenario makes its own checks; the closing line counts the checks that ran.
def observability_abuse(tmp):
    """2000 requests with invented paths and methods, hostile X-Request-Id and traceparent headers and wrong tokens:
    the metrics keep a bounded set of series (every path outside the API counts as endpoint="other"), count every
    request, and every reply echoes a safe request id (an unsafe one is replaced, never echoed)."""
    import re
    workspace = os.path.join(tmp, "observability")
    os.makedirs(workspace)
    token = "faults-metrics-token"
    server = Server(workspace, env=dict(os.environ, EXEC_SERVER_TOKEN=token))
    rng = random.Random(13)
    hostile_ids = ["has space", 'quo"te', "x" * 5000, "%0d%0aInjected: yes", "ü-unicode", "", "ok-id.1:2_3"]
    safe = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
    sent, unsafe_echoes, echoed_hostile = 0, 0, 0
    for i in range(2000):
        method = rng.choice(["GET", "POST", "PUT", "DELETE", "PATCH"])
        path = rng.choice(["/health", "/info", "/exec", "/metrics", f"/invented/{i}/{rng.random()}"])
        request_id = rng.choice(hostile_ids)
        headers = [f"X-Request-Id: {request_id}", f"traceparent: 00-{'z' * 32}-{i:016x}-01",
                   f"Authorization: Bearer {rng.choice([token, 'wrong'])}"]
        reply = raw_request(server.port, http_bytes(method, path, b"{}", headers))
        sent += 1
        head = reply.split(b"\r\n\r\n", 1)[0].decode("latin-1")
        echoed = [line.split(":", 1)[1].strip() for line in head.split("\r\n") if line.lower().startswith("x-request-id:")]
        if len(echoed) != 1 or not safe.match(echoed[0]):
            unsafe_echoes += 1
        elif echoed[0] == request_id and request_id != "ok-id.1:2_3":
            echoed_hostile += 1
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    conn.request("GET", "/metrics", headers={"Authorization": f"Bearer {token}"})
    text = conn.getresponse().read().decode()
    series = [line for line in text.splitlines() if line.startswith("exec_server_http_requests_total{")]
    counted = sum(float(line.rsplit(" ", 1)[1]) for line in series)
    server.stop()
    check("metrics series stay bounded under invented paths", len(series) <= 40,
          f"{len(series)} request series after {sent} requests over ~400 distinct invented paths")
    check("every request is counted", counted == sent, f"{counted:.0f} counted of {sent} sent")
    check("every reply echoes one safe request id", unsafe_echoes == 0 and echoed_hostile == 0,
          f"{unsafe_echoes} replies without one safe id, {echoed_hostile} echoing a hostile id, of {sent}")


def spill_files(server, state):
    """The server's open spill files in `state` (read as root, or as the server's user where it is dumpable)."""
    fd_dir = f"/proc/{server.proc.pid}/fd"
    count = 0
    for fd in os.listdir(fd_dir):
        try:
            count += os.readlink(os.path.join(fd_dir, fd)).startswith(state + "/")
        except OSError:
            pass
    return count + len(os.listdir(state))


def named_runs_abuse(tmp):
    """Named runs against their bounds: 1000 named runs, a tenth of them 1 MB (spilled to disk), keep the
    registry and the state folder within --max-runs and the server's memory flat; 20 named runs whose clients
    vanish are all stopped after the reattach window; 300 hostile run ids are all refused; the state folder goes
    at exit."""
    workspace = os.path.join(tmp, "named-runs")
    state = os.path.join(tmp, "named-runs-state")
    os.makedirs(workspace)
    server = Server(workspace, "--max-runs", "20", "--state-dir", state, "--reattach-window", "1", "--grace", "0.5",
                    "--run-memory", str(256 * 1024))
    rss_before = server.status("VmRSS")
    most_files, failed = 0, 0
    for i in range(1000):
        cmd = "head -c 1000000 /dev/zero" if i % 10 == 0 else "echo short"
        status, body = server.post("/exec", json.dumps({"cmd": ["sh", "-c", cmd], "run_id": f"faults-{i}"}))
        if status != 200 or json.loads(body)["exit_code"] != 0:
            failed += 1
        # Spill files have no name (docs/operations.md): count the server's descriptors that lead into the folder.
        most_files = max(most_files, spill_files(server, state))
    rss_after = server.status("VmRSS")
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    conn.request("GET", "/runs")
    kept = len(json.loads(conn.getresponse().read())["runs"])
    check("1000 named runs stay within --max-runs", failed == 0 and kept <= 20 and most_files <= 40,
          f"{failed} failed, {kept} kept (limit 20), at most {most_files} spill files (limit 40)")
    check("1000 named runs keep memory flat", rss_after < rss_before + 32 * MiB,
          f"RSS {rss_before / MiB:.1f} MiB before, {rss_after / MiB:.1f} MiB after 1000 runs (100 of 1 MB)")

    marker = f"{os.getpid()}.{random.randrange(10**6):06d}4242"
    for i in range(20):
        body = json.dumps({"cmd": ["sh", "-c", f"echo up; sleep {marker}"], "run_id": f"abandoned-{i}"}).encode()
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        sock.sendall(http_bytes("POST", "/exec/stream", body))
        sock.recv(4096)
        sock.close()
    started = time.monotonic()
    while processes_with(marker) and time.monotonic() - started < 30:
        time.sleep(0.1)
    left = processes_with(marker)
    check("named runs whose clients vanish are stopped after the window", not left,
          f"{len(left)} of 20 left {time.monotonic() - started:.1f} s after their clients went (window 1 s, grace 0.5 s)")

    hostile = ["", "x" * 65, "x" * 100000, "../x", "..", "/etc/passwd", "a/b", "a\\b", " x", "x\u0000", "ü", "-x",
               ".hidden", "a b", "a\nb"]
    refused = 0
    for i in range(300):
        run_id = hostile[i % len(hostile)]
        status, _ = server.post("/exec", json.dumps({"cmd": ["true"], "run_id": run_id}))
        refused += status == 400
    check("hostile run ids are refused", refused == 300, f"{refused} of 300 refused with 400")
    server.stop()
    check("the state folder is removed at exit", not os.path.exists(state), f"{state} exists: {os.path.exists(state)}")


class CuttingProxy:
    """A loopback TCP proxy to `port` that resets each connection after a seeded random count of bytes sent towards
    the client, until `cuts` resets are done (then connections pass whole). Counts connections and cuts."""

    def __init__(self, port, seed, low, high, cuts):
        self.port, self.random, self.low, self.high, self.left = port, random.Random(seed), low, high, cuts
        self.connections = self.cuts = 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            budget = self.random.randint(self.low, self.high) if self.left > 0 else None
            threading.Thread(target=self.forward, args=(client, budget), daemon=True).start()

    def forward(self, client, budget):
        server = socket.create_connection(("127.0.0.1", self.port))
        threading.Thread(target=self.pump, args=(client, server), daemon=True).start()
        cut = False
        while True:
            try:
                data = server.recv(65536)
            except OSError:
                break
            if not data:
                break
            if budget is not None and len(data) >= budget:
                data, cut = data[:budget], True
            try:
                client.sendall(data)
            except OSError:
                break
            if cut:
                break
            if budget is not None:
                budget -= len(data)
        if cut and self.left > 0:
            self.left -= 1
            self.cuts += 1
            for sock in (client, server):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        for sock in (client, server):
            # shutdown first: close() alone leaves the socket open while the pump thread is still in recv() on it.
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()

    @staticmethod
    def pump(client, server):
        try:
            while data := client.recv(65536):
                server.sendall(data)
        except OSError:
            pass

    def close(self):
        self.listener.close()


def flaky_network(tmp):
    """47 MB of `seq` (under the server's 64 MiB --run-log-max, so nothing is dropped) streamed through a proxy that resets the connection 30 times at seeded random points: with
    named runs the client's stdout is byte-identical to `seq` run locally, exit 0, the command ran once (before,
    i.e. SIDECAR_RESUME=0: the first reset ends the command and the client exits 1 with part of the output)."""
    workspace = os.path.join(tmp, "flaky")
    os.makedirs(workspace)
    server = Server(workspace)
    expected = subprocess.run(["seq", "1", "6000000"], capture_output=True, check=True).stdout
    seed = int(os.environ.get("FAULTS_SEED", time.time_ns() % 1_000_000))
    figures = {}
    for resume in ("0", "1"):
        # At most 30 × 1 MiB of budgets: always within the ~47 MB the stream carries, so all 30 resets happen.
        proxy = CuttingProxy(server.port, seed, 64 * 1024, MiB, 30)
        env = {"PATH": os.environ["PATH"], "SIDECAR_STREAM": "1", "SIDECAR_RESUME": resume, "SIDECAR_CWD": workspace,
               "BUILD_SIDECARS": json.dumps({"python": {"internal_url": proxy.url}})}
        started = time.time()
        run = subprocess.run([CLIENT, "python", "sh", "-c", "echo run >> runs.count; seq 1 6000000"],
                             capture_output=True, env=env, timeout=600)
        took = time.time() - started
        with open(os.path.join(workspace, "runs.count")) as f:
            ran = len(f.readlines())
        os.remove(os.path.join(workspace, "runs.count"))
        figures[resume] = (run.returncode, run.stdout == expected, len(run.stdout), proxy.cuts,
                           proxy.connections - 1, ran, took)
        proxy.close()
    before, after = figures["0"], figures["1"]
    check("30 connection resets while streaming 47 MB", after[0] == 0 and after[1] and after[3] == 30 and after[5] == 1
          and before[0] == 1 and not before[1],
          f"seed {seed}; before (SIDECAR_RESUME=0): exit {before[0]}, {before[2]} of {len(expected)} bytes after "
          f"{before[3]} reset; after: exit {after[0]}, output identical {after[1]}, {after[3]} resets, "
          f"{after[4]} reconnects, ran {after[5]} time(s), {after[6]:.1f} s")
    server.stop()


def b64_only_hostile_replies(tmp):
    """A server that sends `x-b64-only` (the client then writes stdout while the reply arrives) cannot make
    the client hold its reply: 600 MiB of stdout pass through a client whose peak RSS stays small (before, the client
    held every reply and refused one over 256 MiB). And one that sends the header with a lossy `output` beside
    `output_b64` anyway gets an error exit, not the lossy text passed off as the output."""
    total = 600 * MiB
    piece = b"a" * MiB
    twin = b'{"exit_code":0,"output":"\\ufffdA","output_b64":"/0E="}'
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    port = listener.getsockname()[1]

    def serve(conn):
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            head, _, rest = data.partition(b"\r\n\r\n")
            length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                              if line.lower().startswith(b"content-length")))
            while len(rest) < length:
                rest += conn.recv(65536)
            lossy = b"twin" in rest
            conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nx-b64-only: 1\r\n"
                         b"transfer-encoding: chunked\r\nconnection: close\r\n\r\n")

            def chunk(data):
                conn.sendall(b"%x\r\n" % len(data) + data + b"\r\n")
            if lossy:
                chunk(twin)
            else:
                chunk(b'{"exit_code":0,"output":"')
                for _ in range(total // MiB):
                    chunk(piece)
                chunk(b'","stderr":""}')
            conn.sendall(b"0\r\n\r\n")

    def accept_two():
        for _ in range(2):
            conn, _ = listener.accept()
            try:
                serve(conn)
            except OSError:
                pass  # a client that gave up (an older one refuses a reply over 256 MiB)

    pool = ThreadPoolExecutor(1)
    served = pool.submit(accept_two)
    env = {"PATH": "/usr/bin:/bin", "BUILD_SIDECARS": json.dumps({"python": {"internal_url": f"http://127.0.0.1:{port}"}})}
    # The client's own peak RSS, from a parent that has no other children.
    measure = ("import resource, subprocess, sys; "
               "p = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.PIPE); "
               "print(p.returncode, len(p.stdout), resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    big = subprocess.run([sys.executable, "-c", measure, CLIENT, "python", "big"], env=env, capture_output=True,
                         text=True, timeout=120)
    code, written, peak_kib = (big.stdout.split() + ["?", "0", "0"])[:3]
    twin_run = subprocess.run([CLIENT, "python", "twin"], env=env, capture_output=True, timeout=60)
    served.result(timeout=60)
    pool.shutdown()
    listener.close()
    check("x-b64-only reply of 600 MiB: written through, not held",
          code == "0" and int(written) == total and int(peak_kib) < 64 * 1024,
          f"exit {code}, {int(written) // MiB} of {total // MiB} MiB on stdout, client peak RSS {int(peak_kib) // 1024} MiB "
          "(before: refused over 256 MiB, after holding it)")
    check("x-b64-only with a lossy twin anyway: an error exit", twin_run.returncode == 1
          and b"sent an unreadable reply" in twin_run.stderr,
          f"exit {twin_run.returncode}, {twin_run.stderr.decode(errors='replace').strip()[:120]!r}")


def get_json(port, path, timeout=10):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    conn.request("GET", path)
    response = conn.getresponse()
    return response.status, json.loads(response.read() or b"null")


def stuck_follower(tmp):
    """A stuck follower: a named run (`yes`, timeout 2) whose owner left, followed by a reader with a 4 KiB receive
    buffer that never reads. The run ends, and gives back its --max-concurrent 1 slot, within timeout + grace + 1 s
    (before: the processes died at 2 s, but the run stayed `running`, kept the slot, and the next command got 503
    until the stuck reader left)."""
    workspace = os.path.join(tmp, "stuck-follower")
    os.makedirs(workspace)
    server = Server(workspace, "--max-concurrent", "1", "--grace", "0.5")
    marker = f"{os.getpid()}{random.randrange(10**6):06d}"
    body = json.dumps({"cmd": ["yes", marker], "timeout": 2, "run_id": "stuck"}).encode()
    started = time.monotonic()
    owner = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    owner.sendall(http_bytes("POST", "/exec/stream", body))
    owner.recv(65536)
    owner.close()
    stuck = socket.socket()
    stuck.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    stuck.connect(("127.0.0.1", server.port))
    stuck.sendall(http_bytes("GET", "/runs/stuck/stream"))
    ended_after, info = None, {}
    while time.monotonic() - started < 15:
        status, info = get_json(server.port, "/runs/stuck")
        if status == 200 and info["state"] != "running":
            ended_after = time.monotonic() - started
            break
        time.sleep(0.05)
    status, _ = server.post("/exec", json.dumps({"cmd": ["true"]}))
    state = info.get("state")
    check("a follower that stops reading does not hold a run past its timeout",
          ended_after is not None and ended_after <= 2 + 0.5 + 1 and status == 200,
          f"run {state} after {ended_after if ended_after is None else round(ended_after, 2)} s (limit 3.5 s), "
          f"next command {status} (--max-concurrent 1), the stuck reader still connected")
    stuck.close()
    server.stop()


class HoldingProxy(CuttingProxy):
    """A CuttingProxy that cuts its first connection after `budget` bytes towards the client, and forwards later ones
    only once `release` is set: a client cut off, then away for as long as the scenario says."""

    def __init__(self, port, budget):
        self.release = threading.Event()
        super().__init__(port, 0, budget, budget, 1)

    def forward(self, client, budget):
        if budget is None:
            self.release.wait()
        super().forward(client, budget)


def forgotten_result(tmp):
    """A forgotten result: --max-runs 3, a streaming client cut off (window 30 s) while its run ends with exit 0 and
    three quick named runs take the room; then it reconnects. It exits 1 saying the run ended and its result is no
    longer kept, never "run it again", and the command ran once (before: 404 run_not_known, and the client said the
    sidecar "stopped the command … run it again")."""
    workspace = os.path.join(tmp, "forgotten-result")
    os.makedirs(workspace)
    server = Server(workspace, "--max-runs", "3", "--reattach-window", "30")
    proxy = HoldingProxy(server.port, 400)
    env = {"PATH": os.environ["PATH"], "SIDECAR_STREAM": "1", "SIDECAR_CWD": workspace,
           "BUILD_SIDECARS": json.dumps({"python": {"internal_url": proxy.url}})}
    script = "echo ran >> runs.count; echo start; while [ ! -e go ]; do sleep 0.05; done; echo done"
    client = subprocess.Popen([CLIENT, "python", "sh", "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              env=env)
    while proxy.connections < 2 and client.poll() is None:
        time.sleep(0.02)
    open(os.path.join(workspace, "go"), "w").close()
    deadline = time.monotonic() + 20
    ended = None
    while time.monotonic() < deadline and ended is None:
        _, runs = get_json(server.port, "/runs")
        ended = next((run for run in runs["runs"] if run["state"] != "running"), None)
        time.sleep(0.05)
    for i in range(3):
        server.post("/exec", json.dumps({"cmd": ["true"], "run_id": f"quick-{i}"}))
    proxy.release.set()
    out, err = client.communicate(timeout=60)
    with open(os.path.join(workspace, "runs.count")) as f:
        ran = len(f.readlines())
    said = err.decode(errors="replace").strip().splitlines()[-1] if err.strip() else ""
    check("a result forgotten while its client reconnects is not 'run it again'",
          client.returncode == 1 and "no longer kept" in said and "run it again" not in said and ran == 1,
          f"exit {client.returncode}, ran {ran} time(s), the client said: {said[:220]}")
    proxy.close()
    server.stop()


def spill_file_privacy(tmp):
    """Spill file privacy: as user nobody (root reads everything), a run spills a secret to disk; later commands of
    the same user look for it: the state folder lists no file, grep finds nothing there, /proc/<server>/fd,
    environ and mem are closed, no spill file can be rewritten through /proc, and the replay is the run's exact
    output (before: `ls` showed the spill file, a command read the secret, and a same-length rewrite was served
    as that run's output)."""
    base = tempfile.mkdtemp(prefix="faults-privacy-")
    os.chmod(base, 0o755)
    workspace, state = os.path.join(base, "workspace"), os.path.join(base, "state")
    os.makedirs(workspace)
    for path in (base, workspace):
        os.chown(path, 65534, 65534)

    def as_nobody():
        os.setgid(65534)
        os.setuid(65534)

    server = Server(workspace, "--run-memory", str(256 * 1024), "--state-dir", state,
                    preexec_fn=as_nobody if os.geteuid() == 0 else None)
    secret = f"SECRET-{random.randrange(10**12):012d}"
    spill = f"printf {secret}; head -c 1000000 /dev/zero | tr '\\0' x"
    _, body = server.post("/exec", json.dumps({"cmd": ["sh", "-c", spill], "run_id": "secret"}))
    original = json.loads(body)["output"]
    probes = {
        "ls -A state": f"ls -A {state}",
        "grep the secret": f"grep -rl {secret} {state}",
        "/proc/<server>/fd": "ls /proc/$PPID/fd",
        "/proc/<server>/environ": "cat /proc/$PPID/environ",
        "/proc/<server>/mem": "cat /proc/$PPID/mem",
        "rewrite through /proc": "for f in /proc/$PPID/fd/*; do printf %s XXXXXX > $f || exit 1; done",
    }
    seen = {}
    for name, probe in probes.items():
        _, body = server.post("/exec", json.dumps({"cmd": ["sh", "-c", probe]}))
        reply = json.loads(body)
        seen[name] = (reply["exit_code"], reply["output"].strip()[:60])
    reached = [name for name, (code, out) in seen.items()
               if (name == "ls -A state" and out) or (name != "ls -A state" and code == 0)]
    replay = raw_request(server.port, http_bytes("GET", "/runs/secret/stream")).decode(errors="replace")
    frames = [json.loads(line[6:]) for line in replay.split("\n") if line.startswith("data: ")]
    replayed = "".join(frame["data"] for frame in frames if frame["type"] == "stdout")
    check("spill files and the server's memory are out of a command's reach",
          not reached and replayed == original and frames[-1]["type"] == "exit" and frames[-1]["data"] == 0,
          f"{len(probes) - len(reached)} of {len(probes)} probes found nothing ({', '.join(reached) or 'none reached'}"
          f"); the replay is the run's exact output: {replayed == original} ({len(replayed)} bytes)")
    server.stop()
    subprocess.run(["rm", "-rf", base], check=False)


SCENARIOS = [
    abuse,
    sequential,
    sigterm_with_50_running,
    floods,
    bad_inputs,
    adopted_zombies,
    cwd_swap_race,
    ipc_hostile_files,
    unread_replies,
    connection_limits,
    observability_abuse,
    named_runs_abuse,
    flaky_network,
    b64_only_hostile_replies,
    stuck_follower,
    forgotten_result,
    spill_file_privacy,
]


def main():
    require_binaries("bench/faults.sh")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for scenario in SCENARIOS:
                scenario(tmp)
    finally:
        for proc in RUNNING:
            if proc.poll() is None:
                proc.kill()
    print(f"{len(CHECKED) - len(FAILURES)} passed, {len(FAILURES)} failed")
    sys.exit(1 if FAILURES else 0)


if __name__ == "__main__":
    main()
