#!/usr/bin/env bash
# Install a pinned anvil (Foundry's local EVM node) into .tools/bin/anvil.
#
# The npm package @foundry-rs/anvil-linux-amd64 ships the native ELF binary at
# node_modules/@foundry-rs/anvil-linux-amd64/bin/anvil (no postinstall, no node
# wrapper), so we install it under .tools/npm and symlink it to .tools/bin.
# Pinned so every machine and CI run tests against the same node behaviour.
# Idempotent: does nothing when .tools/bin/anvil already reports the pin.
set -euo pipefail

ANVIL_VERSION="1.7.1"
PKG="@foundry-rs/anvil-linux-amd64"

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT="$PWD"
TOOLS="$ROOT/.tools"
BIN="$TOOLS/bin/anvil"

installed_version() {
    # First line looks like: "anvil Version: 1.7.1"
    "$BIN" --version 2>/dev/null | sed -n 's/^anvil Version: \([^ ]*\).*/\1/p' | head -n1
}

if [[ -x "$BIN" ]] && [[ "$(installed_version || true)" == "$ANVIL_VERSION" ]]; then
    echo "anvil $ANVIL_VERSION already installed at $BIN"
    exit 0
fi

case "$(uname -s)-$(uname -m)" in
    Linux-x86_64) ;;
    *)
        echo "install-anvil: $PKG only supports Linux x86_64 (this is $(uname -s)-$(uname -m))" >&2
        exit 1
        ;;
esac

command -v npm >/dev/null || { echo "install-anvil: npm is required" >&2; exit 1; }

echo "installing $PKG@$ANVIL_VERSION into $TOOLS/npm"
mkdir -p "$TOOLS/npm" "$TOOLS/bin"
npm install --prefix "$TOOLS/npm" --no-audit --no-fund --no-save --loglevel=error \
    "$PKG@$ANVIL_VERSION"

SRC="$TOOLS/npm/node_modules/$PKG/bin/anvil"
if [[ ! -f "$SRC" ]]; then
    echo "install-anvil: expected binary at $SRC, package layout changed?" >&2
    exit 1
fi
chmod +x "$SRC"
# Relative link so the checkout can be moved without reinstalling.
ln -sfn "../npm/node_modules/$PKG/bin/anvil" "$BIN"

got="$(installed_version || true)"
if [[ "$got" != "$ANVIL_VERSION" ]]; then
    echo "install-anvil: $BIN reports version '$got', expected $ANVIL_VERSION" >&2
    exit 1
fi
echo "anvil $ANVIL_VERSION installed at $BIN"
