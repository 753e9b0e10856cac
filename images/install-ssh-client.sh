#!/bin/sh
# Makes OpenSSH's client (`ssh`) available to ssh-exec, the SSH backend (docs/ssh-exec.md), in an agent image.
# ssh-exec drives the system's ssh (the user's keys, agent, ~/.ssh/config and known_hosts keep working), so SSH_HOST
# works only where `ssh` is on PATH. Run as root at build time:
#   - by the agent stage of images/Dockerfile when AGENT_SSH=1 (the default);
#   - in any other agent image after copying /opt/sidecar from sidecar-agent: RUN /opt/sidecar/install-ssh-client.sh
# Nothing when ssh is already there; else the distribution's package without recommended ones (no xauth): Debian's
# and Ubuntu's openssh-client through apt-get, Alpine's through apk. It follows the base's release (pin the base by
# digest to freeze it). A base with neither stops the build with one line saying what to do.
set -eu

if command -v ssh >/dev/null 2>&1; then
    echo "install-ssh-client: already there: $(ssh -V 2>&1)"
    exit 0
fi
if command -v apt-get >/dev/null 2>&1; then
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends openssh-client
    # The package lists, the downloaded .debs and apt's caches (the official Debian images drop the last two by
    # their own apt configuration; a plain debootstrapped base keeps ~90 MB of them in the layer).
    apt-get clean
    rm -rf /var/lib/apt/lists/*
elif command -v apk >/dev/null 2>&1; then
    apk add --no-cache openssh-client
else
    echo "install-ssh-client: this base has no ssh and neither apt-get nor apk to install it: add OpenSSH's client" \
        "to the base image, or build with AGENT_SSH=0 (then SSH_HOST cannot work in this image)" >&2
    exit 1
fi
echo "install-ssh-client: installed $(ssh -V 2>&1)"
