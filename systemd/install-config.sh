#!/bin/sh
# SPDX-License-Identifier: MIT
#
# meson install script: copies default configuration files into DIR unless a file of
# that name is already there, so an operator's edits survive reinstalls and upgrades.
# The pristine defaults are installed to share/axctl/conf as well.
# Usage: install-config.sh DIR FILE...
set -eu
dir="$1"
shift
dest="${DESTDIR:-}$dir"
mkdir -p "$dest"
for f in "$@"; do
        target="$dest/$(basename "$f")"
        if [ -e "$target" ]; then
                echo "Keeping $target (the new default is in share/axctl/conf)"
        else
                install -m 0644 "$f" "$target"
                echo "Installing $f to $target"
        fi
done
