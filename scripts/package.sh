#!/usr/bin/env bash
# Builds the Debian package (README "Install"): a release build, then
# `cargo deb`; prints the .deb's path (target/debian/txmgr_<version>_amd64.deb).
#
#   scripts/package.sh              # release build + package
#   scripts/package.sh --no-build   # package the binary already built
#                                   # (PACKAGE_PROFILE, default release)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# Its progress goes to stderr: stdout is the package's path alone
# (package-smoke.sh reads it).
scripts/install-cargo-deb.sh >&2
PROFILE="${PACKAGE_PROFILE:-release}"
args=(--profile "$PROFILE" --output target/debian/)
if [[ "${1:-}" == "--no-build" ]]; then
    args+=(--no-build)
else
    export SQLX_OFFLINE="${SQLX_OFFLINE:-true}"
fi
# A debug build is packaged fast (it is only for the suite's install test).
if [[ "$PROFILE" != release ]]; then
    args+=(--fast)
fi
cargo deb "${args[@]}" | tail -n1
