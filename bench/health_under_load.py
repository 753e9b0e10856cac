"""/health latency while 8 clients send the largest requests the server takes, against the same server idle, in one
run (bench/health_under_load.sh). The requests: the attack's body (80 000 empty variables, 937 KiB: parsed, then
refused with too_many_env_vars), and the largest request the server runs (4096 variables whose values fill the
1 MiB body, `true`). The goal: /health p99 <= 10 ms under either load: parsing is off the runtime's worker threads.

Each load client is a process of its own (not a thread: the measuring process must not wait for the GIL), niced
(it stands for another machine), on its own kept-alive connection, sending one request after another until told to stop; /health is timed one request at a
time on one kept-alive connection from this process.
"""

import argparse
import http.client
import json
import multiprocessing
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from release_server import Server  # noqa: E402

MAX_BODY = 1024 * 1024
MAX_ENV_VARS = 4096


def attack_body():
    env = ",".join(f'"V{i:05}":""' for i in range(80_000))
    return ('{"cmd":["true"],"env":{' + env + "}}").encode()


def largest_allowed_body():
    # 4096 variables, their values filling what is left of 1 MiB (JSON escapes none of the letters).
    head, tail = '{"cmd":["true"],"env":{', "}}"
    names = [f"V{i:04}" for i in range(MAX_ENV_VARS)]
    overhead = len(head) + len(tail) + sum(len(f'"{name}":"",') for name in names) - 1
    each = (MAX_BODY - overhead) // MAX_ENV_VARS
    body = head + ",".join(f'"{name}":"{"x" * each}"' for name in names) + tail
    assert len(body) <= MAX_BODY, len(body)
    return body.encode()


def load(port, body, stop, sent):
    # The senders stand for other machines: niced, so that on a small box their own CPU does not count against the
    # server (what the server does with their requests does).
    os.nice(10)
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    while not stop.is_set():
        try:
            connection.request("POST", "/exec", body=body, headers={"Content-Type": "application/json"})
            response = connection.getresponse()
            response.read()
        except (ConnectionError, http.client.HTTPException):
            # A server that gave up on the body (408) and closed: again, on a new connection.
            connection.close()
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
            continue
        # 400 (the attack, refused), 200, 503 (no slot): answered. Anything else (a 408 from a server too busy to
        # read the body in time) counts too: the load is what it is, the probe measures what it does to /health.
        with sent.get_lock():
            sent.value += 1
        if response.getheader("connection", "").lower() == "close":
            connection.close()
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=600)


def health_latencies(port, count):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    latencies = []
    for _ in range(count):
        started = time.perf_counter()
        connection.request("GET", "/health")
        response = connection.getresponse()
        response.read()
        latencies.append(time.perf_counter() - started)
        assert response.status == 200
    return latencies


def summary(latencies):
    ordered = sorted(latencies)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return statistics.median(ordered) * 1000, p99 * 1000, ordered[-1] * 1000


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--probes", type=int, default=2000, help="/health requests per case")
    parser.add_argument("--clients", type=int, default=8)
    args = parser.parse_args()
    workspace = tempfile.mkdtemp(prefix="health-under-load-")
    server = Server(workspace)
    cases = [("idle", None), ("attack: 80 000 empty variables, 937 KiB", attack_body()),
             ("largest allowed: 4096 variables, 1 MiB", largest_allowed_body())]
    results = []
    idle_p99 = None
    for name, body in cases:
        stop, sent, workers = multiprocessing.Event(), multiprocessing.Value("l", 0), []
        if body is not None:
            workers = [multiprocessing.Process(target=load, args=(server.port, body, stop, sent))
                       for _ in range(args.clients)]
            for worker in workers:
                worker.start()
            # The load is on once every client has had a reply (each has sent one, the server is busy with more).
            while sent.value < args.clients:
                time.sleep(0.01)
        started = time.monotonic()
        latencies = health_latencies(server.port, args.probes)
        elapsed = time.monotonic() - started
        stop.set()
        for worker in workers:
            worker.join()
        p50, p99, worst = summary(latencies)
        idle_p99 = idle_p99 or p99
        rate = sent.value / elapsed if body is not None else 0
        results.append((name, p50, p99, worst, p99 / idle_p99, rate))
    load1 = os.getloadavg()[0]
    print(f"/health, {args.probes} probes per case, {args.clients} load clients, load average {load1:.1f} on "
          f"{os.cpu_count()} cores")
    print("| load | /health p50 | p99 | max | p99 vs idle | large requests/s |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, p50, p99, worst, ratio, rate in results:
        print(f"| {name} | {p50:.2f} ms | {p99:.2f} ms | {worst:.1f} ms | {ratio:.1f}x | {rate:.0f} |")
    failed = [name for name, _, p99, *_ in results if p99 > 10]
    if failed:
        print(f"goal missed (p99 > 10 ms): {', '.join(failed)}")
        sys.exit(1)


if __name__ == "__main__":
    main()
