#!/usr/bin/env bash
# Checks that the API answers what its OpenAPI document says: a real daemon
# (scripts/dev.sh: anvil + PostgreSQL, on free ports, with a throw-away
# database and an ops token) fuzzed by schemathesis from PyPI against
# GET /v1/openapi.json. Any finding fails the run. scripts/test.sh calls this.
#
# Checks: not_a_server_error, status_code_conformance, content_type_conformance,
# response_schema_conformance — once with a valid ops token (every route is
# exercised past authentication), once without a token (401 must be documented).
#
# Environment: DATABASE_URL (admin URL, as for the tests), DEV_PROFILE
# (cargo profile; test.sh passes `dev` to reuse the test build),
# CONFORMANCE_MAX_EXAMPLES (cases per operation and phase, default 25),
# CONFORMANCE_SEED (default 1: the same cases every run; change it to explore).
# About 30 s on 2 cores once the daemon is built and schemathesis installed.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT="$PWD"

# schemathesis 4's CLI (`st run URL --checks … --max-examples N -H …`); pinned
# so that a new release cannot change what the suite checks.
SCHEMATHESIS_VERSION=4.32.5
VENV="$ROOT/.tools/schemathesis-$SCHEMATHESIS_VERSION"
CHECKS=not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance
MAX_EXAMPLES="${CONFORMANCE_MAX_EXAMPLES:-25}"

say() { printf 'api-conformance: %s\n' "$*"; }
die() { say "FAILED: $*"; [[ -f "$LOG" ]] && tail -n 60 "$LOG" >&2; exit 1; }

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

ADMIN_URL="${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}"
WORK="$ROOT/.tools/api-conformance"
LOG="$WORK/dev.log"
mkdir -p "$WORK"

# ------------------------------------------------------------ schemathesis
# CPython 3.11 before 3.11.8 (Debian bookworm's, pyenv's 3.11.7) can raise
# "SystemError: AST constructor recursion depth mismatch" inside
# Hypothesis at random (python/cpython#106905), which schemathesis reports
# as an error of the run: use a newer interpreter when the machine has one.
PYTHON=python3
candidates=(python3.13 python3.12)
if command -v pyenv >/dev/null; then
    for interpreter in "$(pyenv root)"/versions/3.1[2-9]*/bin/python3; do
        [[ -x "$interpreter" ]] && candidates+=("$interpreter")
    done
fi
for candidate in "${candidates[@]}"; do
    if "$candidate" -c 'import sys, ensurepip; sys.exit(sys.version_info < (3, 12, 2))' 2>/dev/null; then
        PYTHON="$candidate"
        break
    fi
done
if [[ ! -x "$VENV/bin/st" ]] || [[ "$("$VENV/bin/python" -c 'import sys; print(sys.version_info[:2])' 2>/dev/null)" != "$("$PYTHON" -c 'import sys; print(sys.version_info[:2])')" ]] || ! "$VENV/bin/st" --version 2>/dev/null | grep -qF "$SCHEMATHESIS_VERSION"; then
    if ! "$PYTHON" -m venv --help >/dev/null 2>&1 || ! "$PYTHON" -c 'import ensurepip' 2>/dev/null; then
        if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null; then
            say "installing Debian's python3-venv"
            apt-get update -qq
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
        else
            die "python3 -m venv is missing: install python3-venv"
        fi
    fi
    say "installing schemathesis $SCHEMATHESIS_VERSION into $VENV"
    rm -rf "$VENV"
    "$PYTHON" -m venv "$VENV"
    "$VENV/bin/pip" install -q --disable-pip-version-check "schemathesis==$SCHEMATHESIS_VERSION"
fi
"$VENV/bin/st" --version

# ------------------------------------------------------------ the daemon
ANVIL_PORT="$(free_port)"
API_PORT="$(free_port)"
while [[ "$API_PORT" == "$ANVIL_PORT" ]]; do API_PORT="$(free_port)"; done
DB="txmgr_conformance_$$"
API="http://127.0.0.1:$API_PORT"
TOKEN="$(python3 -c 'import secrets; print(secrets.token_hex(32))')"
TOKEN_SHA256="$(printf %s "$TOKEN" | sha256sum | cut -d' ' -f1)"

# The documented configuration plus an ops token: every route is reachable
# with it, and without it the authenticated ones answer 401. The token has
# a create rate and the submitters a policy, so the guardrails' answers
# (429 rate_limited, 403 policy_violation) are generated and checked too.
CONFIG="$WORK/config.toml"
cp config.toml "$CONFIG"
cat >>"$CONFIG" <<TOML

[[auth.tokens]]
name = "conformance"
role = "ops"
sha256 = "$TOKEN_SHA256"
rate = { creates_per_second = 20, burst = 40 }
TOML
# Into the documented (commented) [defaults.policy] table.
grep -qx '\[defaults.policy\]' "$CONFIG" || die "config.toml has no [defaults.policy] table"
sed -i '/^\[defaults.policy\]$/a max_value_per_tx = "1000000000000000000"\
deny_contract_creation = true\
allowed_selectors = { "0x70997970c51812dc3a010c7d01b50e0d17dc79c8" = ["0xa9059cbb"] }' "$CONFIG"

# Realistic values half of the time: a fuzzed address or chain id is almost
# never one the daemon serves, and a fuzzed create almost never passes the
# policy above, so without them the operations on a submitter and the
# create would answer 4xx to nearly every case and their success answers
# (checked against the document like every other) would hardly be sent.
SUBMITTER="$(sed -n 's/^\[submitters\."\(0x[0-9a-f]\{40\}\)"\]$/\1/p' "$CONFIG" | head -n 1)"
CHAIN_ID="$(sed -n 's/^chain_id = \([0-9]\+\)$/\1/p' "$CONFIG" | head -n 1)"
[[ -n "$SUBMITTER" && -n "$CHAIN_ID" ]] || die "config.toml names no submitter or chain_id"
ST_CONFIG="$WORK/schemathesis.toml"
cat >"$ST_CONFIG" <<TOML
[dictionaries.submitters]
values = ["$SUBMITTER"]

[dictionaries.chains]
values = [$CHAIN_ID]

[dictionaries.targets]
values = ["0x1111111111111111111111111111111111111111"]

[dictionaries.values]
values = ["1"]

[dictionaries.fees]
values = ["1000000000"]

[parameters]
"path.address" = { dictionary = "submitters", probability = 0.5 }
"query.submitter" = { dictionary = "submitters", probability = 0.5 }
"query.chain_id" = { dictionary = "chains", probability = 0.5 }
"body.submitter" = { dictionary = "submitters", probability = 0.5 }
"body.chain_id" = { dictionary = "chains", probability = 0.5 }
"body.to" = { dictionary = "targets", probability = 0.5 }
"body.value" = { dictionary = "values", probability = 0.5 }
"body.max_fee_per_gas" = { dictionary = "fees", probability = 0.5 }
"body.max_priority_fee_per_gas" = { dictionary = "fees", probability = 0.5 }
TOML

cleanup() {
    if [[ -n "${DEV_PID:-}" ]] && kill -0 "$DEV_PID" 2>/dev/null; then
        kill -TERM "$DEV_PID" 2>/dev/null || true
        wait "$DEV_PID" 2>/dev/null || true
    fi
    psql "$ADMIN_URL" -Xq -c "drop database if exists $DB with (force)" >/dev/null 2>&1 || true
}
trap cleanup EXIT

say "scripts/dev.sh with anvil on :$ANVIL_PORT, API on :$API_PORT, database $DB (log: $LOG)"
# A short request timeout bounds the completion feed's long polls.
TXMGR_HTTP__REQUEST_TIMEOUT=3s \
    DEV_PG_URL="$ADMIN_URL" DEV_DB="$DB" DEV_ANVIL_PORT="$ANVIL_PORT" \
    DEV_LISTEN="127.0.0.1:$API_PORT" DEV_CONFIG="$CONFIG" DEV_PROFILE="${DEV_PROFILE:-release}" \
    scripts/dev.sh >"$LOG" 2>&1 &
DEV_PID=$!

for _ in $(seq 1 600); do
    curl -fsS -m 2 "$API/readyz" >/dev/null 2>&1 && break
    kill -0 "$DEV_PID" 2>/dev/null || die "dev.sh exited before /readyz answered"
    sleep 0.5
done
curl -fsS -m 2 "$API/readyz" >/dev/null || die "/readyz not ready within 300 s"

# ------------------------------------------------------------ the runs
run_st() {
    local what="$1"
    shift
    say "schemathesis: $what"
    # From $WORK: schemathesis keeps its replay cache in ./.schemathesis.
    (cd "$WORK" && "$VENV/bin/st" --config-file "$ST_CONFIG" run "$API/v1/openapi.json" \
        --checks "$CHECKS" \
        --max-examples "$MAX_EXAMPLES" \
        --request-timeout 10 \
        --workers 2 \
        --seed "${CONFORMANCE_SEED:-1}" \
        --generation-database none \
        --no-color \
        "$@") || die "schemathesis found answers the document does not describe ($what)"
}
run_st "with an ops token" -H "Authorization: Bearer $TOKEN"
run_st "without a token" --max-examples 5
say "the API answers as its OpenAPI document says"
