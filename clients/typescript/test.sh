#!/usr/bin/env bash
# The TypeScript SDK's whole check, one entry for scripts/test.sh:
#   install (npm ci, only when node_modules is missing or older than
#   package-lock.json) → the generated types are fresh → build → unit tests
#   → daemon tests (a real txmgr, anvil and PostgreSQL each) → npm pack.
#
# Environment (all required; a missing tool is a failure, never a skip):
#   TXMGR_BIN     the daemon binary (`txmgr run --config FILE`)
#   ANVIL_BIN     anvil
#   DATABASE_URL  an admin URL of the PostgreSQL server, e.g.
#                 postgres://postgres@127.0.0.1:5432/postgres (each daemon test
#                 file creates a database of its own and drops it)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"

fail() {
    echo "clients/typescript/test.sh: $*" >&2
    exit 1
}

: "${TXMGR_BIN:?TXMGR_BIN must name the txmgr binary}"
: "${ANVIL_BIN:?ANVIL_BIN must name the anvil binary}"
: "${DATABASE_URL:?DATABASE_URL must be an admin URL of the PostgreSQL server}"
[[ -x "$TXMGR_BIN" ]] || fail "TXMGR_BIN=$TXMGR_BIN is not an executable"
[[ -x "$ANVIL_BIN" ]] || fail "ANVIL_BIN=$ANVIL_BIN is not an executable"
for tool in node npm psql; do
    command -v "$tool" >/dev/null || fail "$tool is not on the PATH"
done
node_major="$(node -p 'process.versions.node.split(".")[0]')"
((node_major >= 20)) || fail "Node >= 20 is needed, found $(node --version)"
psql "$DATABASE_URL" -qAtX -c 'SELECT 1' >/dev/null || fail "cannot reach PostgreSQL at DATABASE_URL"
[[ -f package-lock.json ]] || fail "package-lock.json is missing"
[[ -f ../openapi.json ]] || fail "../openapi.json (the daemon's OpenAPI document) is missing"
export TXMGR_BIN ANVIL_BIN DATABASE_URL

start=$SECONDS
step() { echo "== clients/typescript: $* ($((SECONDS - start)) s)"; }

# npm ci wipes and reinstalls node_modules: only when it is missing or was
# installed from another package-lock.json (its hash is kept beside it).
lock_hash="$(sha256sum package-lock.json | cut -d' ' -f1)"
stamp=node_modules/.txmgr-lock-sha256
if [[ ! -d node_modules || ! -f $stamp || "$(cat "$stamp")" != "$lock_hash" ]]; then
    step "npm ci"
    npm ci --no-audit --no-fund
    echo "$lock_hash" >"$stamp"
fi

step "generated types fresh (npm run check:types)"
npm run --silent check:types

step "build"
npm run --silent build

step "unit tests"
npm run --silent test:unit

step "daemon tests"
npm run --silent test:daemon

step "npm pack"
pack_dir="$(mktemp -d)"
trap 'rm -rf "$pack_dir"' EXIT
npm pack --silent --ignore-scripts --pack-destination "$pack_dir" >/dev/null
tarball="$(ls "$pack_dir"/*.tgz)"
[[ -f "$tarball" ]] || fail "npm pack made no tarball"
# The package holds the built library and its types, and no test.
listing="$(tar -tzf "$tarball")"
for want in package/package.json package/README.md package/dist/index.js package/dist/index.d.ts package/dist/schema.d.ts; do
    grep -qx "$want" <<<"$listing" || fail "the tarball lacks $want"
done
if grep -q '\.test\.' <<<"$listing"; then fail "the tarball holds tests: $(grep '\.test\.' <<<"$listing")"; fi
echo "tarball: $(basename "$tarball"), $(stat -c %s "$tarball") bytes, $(wc -l <<<"$listing") files"

step "passed"
