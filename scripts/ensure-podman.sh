#!/usr/bin/env bash
# What building and running the member image with Podman needs, from Debian's mirror, installed when missing:
# podman; runc (Debian's podman pulls in crun, which refuses a cgroups v1 machine with a controller left on the v2
# hierarchy); netavark and iptables (the containers' own network); mmdebstrap (the base image,
# scripts/make-base-image.sh). See docs/deployment.md, section 5.
set -euo pipefail
exec "$(dirname "$0")/ensure-debian.sh" podman:/usr/bin/podman runc:/usr/sbin/runc netavark:/usr/lib/podman/netavark \
  iptables:/usr/sbin/iptables mmdebstrap:/usr/bin/mmdebstrap
