#!/usr/bin/env python3
"""How a named run's spill file is best written (exec-server/src/runs/log.rs): CPU seconds to write 224 MiB in
64 KiB chunks (the engine's read size) to a new file in $TMPDIR, as exec-server does by default, against disk space
allocated 8 MiB ahead (`fallocate`, what ALLOCATE_STEP does) and against 256 KiB writes. Median of 5 rounds each,
interleaved; the file is removed after each. Standalone (not part of bench/run.sh): python3 bench/spill-write.py"""

import ctypes
import os
import statistics
import tempfile
import time

MiB = 1024 * 1024
TOTAL = 224 * MiB
FALLOC_FL_KEEP_SIZE = 1
libc = ctypes.CDLL(None, use_errno=True)
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]


def write(path, chunk, step):
    data = os.urandom(chunk)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        start = time.process_time()
        allocated = 0
        for offset in range(0, TOTAL, chunk):
            if step and offset + chunk > allocated:
                libc.fallocate(fd, FALLOC_FL_KEEP_SIZE, allocated, step)
                allocated += step
            os.pwrite(fd, data, offset)
        return time.process_time() - start
    finally:
        os.close(fd)
        os.unlink(path)


def main():
    path = os.path.join(tempfile.gettempdir(), f"spill-write-{os.getpid()}")
    variants = {"64 KiB writes": (64 * 1024, 0), "64 KiB writes, fallocate 8 MiB ahead": (64 * 1024, 8 * MiB),
                "256 KiB writes, fallocate 8 MiB ahead": (256 * 1024, 8 * MiB)}
    times = {name: [] for name in variants}
    for _ in range(5):
        for name, (chunk, step) in variants.items():
            times[name].append(write(path, chunk, step))
    print(f"| 224 MiB to {tempfile.gettempdir()} | CPU (median of 5) |\n| --- | --- |")
    for name, values in times.items():
        print(f"| {name} | {statistics.median(values) * 1000:.0f} ms |")


if __name__ == "__main__":
    main()
