#!/usr/bin/env bash
# Regenerates .sqlx/ (the offline data of sqlx's checked queries) against a
# throw-away database migrated from migrations/. Run after changing a
# `query!`-family statement or a migration, then commit .sqlx/.
#
#   scripts/sqlx-prepare.sh
#
# DATABASE_URL: admin connection (default postgres://postgres@127.0.0.1:5432/postgres).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ADMIN_URL="${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}"
SQLX_CLI_VERSION=0.8.6
if ! cargo sqlx --version 2>/dev/null | grep -q "$SQLX_CLI_VERSION"; then
    cargo install sqlx-cli --version "$SQLX_CLI_VERSION" --locked \
        --no-default-features --features postgres,rustls
fi
URL="${ADMIN_URL%/*}/txmgr_sqlx_prepare_$$"
trap 'DATABASE_URL="$URL" sqlx database drop -y >/dev/null 2>&1 || true' EXIT
DATABASE_URL="$URL" sqlx database create
DATABASE_URL="$URL" sqlx migrate run --source migrations >/dev/null
# `-- --all-targets`: as scripts/test.sh checks it.
SQLX_OFFLINE=false DATABASE_URL="$URL" cargo sqlx prepare --workspace -- --all-targets
