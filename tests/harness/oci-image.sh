#!/bin/bash
# oci-image.sh LAYOUT TAG TEXT: an image TAG in the OCI image layout LAYOUT
# (made when missing), built with umoci from the static busybox, no registry:
# /bin/sh and busybox's applets, /content holding TEXT, and IMAGE_ONLY=TEXT
# in the image's environment. Run again with
# another TAG and TEXT for a second image; with the same TAG, the tag moves
# to the new image (the old one's blobs stay). Readable by every user.
set -euo pipefail
layout=$1 tag=$2 text=$3
bb=$(command -v busybox) || { echo "oci-image.sh: no busybox (apt-get install busybox-static)" >&2; exit 1; }
[ -f "$layout/index.json" ] || umoci init --layout "$layout"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
umoci new --image "$layout:$tag"
umoci unpack --image "$layout:$tag" "$work/b" >/dev/null
mkdir -p "$work/b/rootfs/bin" "$work/b/rootfs/tmp"
cp "$bb" "$work/b/rootfs/bin/busybox"
for a in $("$bb" --list); do [ "$a" = busybox ] || ln -sf busybox "$work/b/rootfs/bin/$a"; done
printf '%s\n' "$text" > "$work/b/rootfs/content"
umoci repack --image "$layout:$tag" "$work/b" >/dev/null
umoci config --image "$layout:$tag" --config.cmd /bin/sh --config.env PATH=/bin --config.env "IMAGE_ONLY=$text"
chmod -R a+rX "$layout"
