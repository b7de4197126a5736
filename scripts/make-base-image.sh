#!/usr/bin/env bash
# Makes the base image of deploy/Dockerfile from Debian's mirror alone (no container registry): a Debian bookworm
# root filesystem made with mmdebstrap, imported into podman's image store.
#
#   scripts/make-base-image.sh [IMAGE]          IMAGE defaults to localhost/raftkit-debian:bookworm
#
# Environment: MIRROR (default http://deb.debian.org/debian), PODMAN (default "podman": extra global flags such
# as --root go here), KEEP=1 to keep an image that already exists (no rebuild).
#
# The variant is `essential` (the Essential: yes packages, no apt) plus what the image needs: libstdc++6 (Node's
# binary links it), passwd (useradd, groupadd) and usr-is-merged with mmdebstrap's merged-usr hook (else
# usrmerge and a whole Perl come in). Documentation, manual pages and translations are left out (copyright files
# stay). About 60 MB, in about 30 s with a warm network (docs/deployment.md, section 5, has the figures).
set -euo pipefail
image=${1:-localhost/raftkit-debian:bookworm}
mirror=${MIRROR:-http://deb.debian.org/debian}
podman=${PODMAN:-podman}
if [ "${KEEP:-}" = 1 ] && $podman image exists "$image"; then
  echo "make-base-image: $image exists, kept"
  exit 0
fi
command -v mmdebstrap >/dev/null || { echo "make-base-image: mmdebstrap is not installed (Debian package mmdebstrap)" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || { echo "make-base-image: run as root (mmdebstrap's root mode, podman's system store)" >&2; exit 2; }
tar=$(mktemp --suffix=.tar)
trap 'rm -f "$tar"' EXIT
mmdebstrap --variant=essential --include=libstdc++6,passwd,usr-is-merged \
  --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
  --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/locale/*' \
  --dpkgopt='path-exclude=/usr/share/info/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
  --dpkgopt='path-include=/usr/share/doc/*/copyright' \
  --quiet bookworm "$tar" "$mirror"
$podman import --change 'CMD ["/bin/bash"]' "$tar" "$image" >/dev/null
echo "make-base-image: $image ($(du -m "$tar" | cut -f1) MB)"
