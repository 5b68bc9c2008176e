#!/usr/bin/env bash
# Build a Debian bookworm base image with Python 3.11 from Debian's packages alone, for machines that
# reach no image registry (CI here). Elsewhere, use a stock image instead: --base python:3.11-slim-bookworm.
#   containers/make-local-base.sh [TAG]        (default TAG: distgpu-base:bookworm; needs root and debootstrap)
set -euo pipefail
tag="${1:-distgpu-base:bookworm}"
if docker image inspect "$tag" >/dev/null 2>&1; then echo "$tag exists"; exit 0; fi
command -v debootstrap >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap >/dev/null
rootfs="$(mktemp -d)"
trap 'rm -rf "$rootfs"' EXIT
debootstrap --variant=minbase --include=python3,python3-venv bookworm "$rootfs" \
  "${DEBIAN_MIRROR:-http://deb.debian.org/debian}" >/dev/null
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
tar -C "$rootfs" -c . | docker import - "$tag" >/dev/null
echo "built $tag"
