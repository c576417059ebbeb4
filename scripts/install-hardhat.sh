#!/usr/bin/env bash
# Install a pinned Hardhat 2 (its node runs the EDR engine, another team's EVM
# and pool than anvil) into .tools/hardhat, for the tests that run the core
# scenarios against Hardhat's node as well as anvil (tests/it/common/hardhat.rs).
#
# The npm package `hardhat` is installed under .tools/hardhat/node_modules; the
# tests start `.tools/hardhat/node_modules/.bin/hardhat node` from that folder
# (Hardhat refuses to run from a folder that does not hold it) with the
# project's tests/hardhat/hardhat.config.js. Pinned so every machine and CI run
# tests against the same node behaviour (hardhat pins its EDR version exactly).
# Idempotent: does nothing when .tools/hardhat already holds the pin.
set -euo pipefail

HARDHAT_VERSION="2.29.1"

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT="$PWD"
DIR="$ROOT/.tools/hardhat"
BIN="$DIR/node_modules/.bin/hardhat"

command -v node >/dev/null || { echo "install-hardhat: node (Node.js) is required" >&2; exit 1; }
command -v npm >/dev/null || { echo "install-hardhat: npm is required" >&2; exit 1; }

installed_version() {
    # Read the package's own manifest: running hardhat needs a project config.
    node -p "require('$DIR/node_modules/hardhat/package.json').version" 2>/dev/null
}

if [[ -x "$BIN" ]] && [[ "$(installed_version || true)" == "$HARDHAT_VERSION" ]]; then
    echo "hardhat $HARDHAT_VERSION already installed in $DIR"
    exit 0
fi

echo "installing hardhat@$HARDHAT_VERSION into $DIR"
mkdir -p "$DIR"
npm install --prefix "$DIR" --no-audit --no-fund --no-save --loglevel=error \
    "hardhat@$HARDHAT_VERSION"

got="$(installed_version || true)"
if [[ ! -x "$BIN" || "$got" != "$HARDHAT_VERSION" ]]; then
    echo "install-hardhat: $BIN missing or reports version '$got', expected $HARDHAT_VERSION" >&2
    exit 1
fi
echo "hardhat $HARDHAT_VERSION installed in $DIR"
