#!/usr/bin/env python3
"""P8: keystroke -> echo round trip in TTY mode, sidecar-exec against a release exec-server on loopback,
with `ssh -tt` to a private sshd on 127.0.0.1 measured in the same run as the anchor (bench/pty_latency.py does the
measuring: it is the terminal). Run through bench/p8.sh. Extra arguments go to pty_latency.py (--keys, --json)."""

import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pty_latency  # noqa: E402
import release_server  # noqa: E402


def main():
    release_server.require_binaries("bench/p8.sh")
    cases = ["bare-ld", "bare-program"]
    if shutil.which("sshd") or os.path.exists("/usr/sbin/sshd"):
        cases += ["ssh-ld", "ssh-program"]
    else:
        print("bench/p8: no sshd (Debian package openssh-server): the ssh -tt anchor is not measured", file=sys.stderr)
    with tempfile.TemporaryDirectory() as workspace:
        server = release_server.Server(workspace)
        os.environ["BUILD_SIDECARS"] = json.dumps({"python": {"internal_url": server.url}})
        os.environ["SIDECAR_CWD"] = workspace
        os.environ.setdefault("TERM", "xterm-256color")
        # On the measuring pty both stdin and stdout are terminals: the client's default is TTY mode.
        client = f"{release_server.CLIENT} python"
        sys.argv = [sys.argv[0], "--cases", ",".join(cases), "--client", client, *sys.argv[1:]]
        pty_latency.main()


if __name__ == "__main__":
    main()
