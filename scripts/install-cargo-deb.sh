#!/usr/bin/env bash
# cargo-deb (crates.io), pinned, into $CARGO_HOME/bin — not into the clone,
# so every fresh clone reuses it. Skipped when that version is there.
set -euo pipefail
VERSION=3.8.0
if cargo deb --version 2>/dev/null | grep -q " $VERSION\b"; then
    exit 0
fi
echo "installing cargo-deb $VERSION into ${CARGO_HOME:-$HOME/.cargo}/bin"
cargo install cargo-deb --version "$VERSION" --locked
