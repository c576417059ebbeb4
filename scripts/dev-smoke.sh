#!/usr/bin/env bash
# Proves the README's first command on every test run: scripts/dev.sh on free
# ports with a throw-away database, /readyz, the README's curl example to
# CONFIRMED, then SIGTERM and a check that it cleaned up after itself
# (daemon and anvil gone, both ports free). scripts/test.sh calls this.
#
# Environment: DATABASE_URL (admin URL, as for the tests), DEV_PROFILE
# (cargo profile; test.sh passes `dev` to reuse the test build).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT="$PWD"

say() { printf 'dev-smoke: %s\n' "$*"; }
die() { say "FAILED: $*"; [[ -f "$LOG" ]] && tail -n 60 "$LOG" >&2; exit 1; }

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
rpc() {
    curl -fsS -m 5 -H 'content-type: application/json' \
        --data "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"$1\",\"params\":[]}" "$ANVIL_URL"
}

ADMIN_URL="${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}"
ANVIL_PORT="$(free_port)"
API_PORT="$(free_port)"
while [[ "$API_PORT" == "$ANVIL_PORT" ]]; do API_PORT="$(free_port)"; done
DB="txmgr_devsmoke_$$"
LOG="$ROOT/.tools/dev-smoke.log"
ANVIL_URL="http://127.0.0.1:$ANVIL_PORT"
API="http://127.0.0.1:$API_PORT"
mkdir -p "$ROOT/.tools"

cleanup() {
    if [[ -n "${DEV_PID:-}" ]] && kill -0 "$DEV_PID" 2>/dev/null; then
        kill -TERM "$DEV_PID" 2>/dev/null || true
        wait "$DEV_PID" 2>/dev/null || true
    fi
    psql "$ADMIN_URL" -Xq -c "drop database if exists $DB with (force)" >/dev/null 2>&1 || true
}
trap cleanup EXIT

say "scripts/dev.sh with anvil on :$ANVIL_PORT, API on :$API_PORT, database $DB (log: $LOG)"
DEV_PG_URL="$ADMIN_URL" DEV_DB="$DB" DEV_ANVIL_PORT="$ANVIL_PORT" \
    DEV_LISTEN="127.0.0.1:$API_PORT" DEV_PROFILE="${DEV_PROFILE:-release}" \
    scripts/dev.sh >"$LOG" 2>&1 &
DEV_PID=$!

# The first run may have to build the daemon.
for _ in $(seq 1 600); do
    curl -fsS -m 2 "$API/readyz" >/dev/null 2>&1 && break
    kill -0 "$DEV_PID" 2>/dev/null || die "dev.sh exited before /readyz answered"
    sleep 0.5
done
curl -fsS -m 2 "$API/readyz" >/dev/null || die "/readyz not ready within 300 s"
say "ready; sending the README's example"

ANSWER="$(curl -sS -X POST "$API/v1/transactions" \
    -H 'content-type: application/json' \
    -d '{"submitter":"0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266",
         "to":"0x70997970c51812dc3a010c7d01b50e0d17dc79c8",
         "value":"1000", "request_id":"hello-1"}')"
TX_ID="$(sed -n 's/.*"tx_id":"\([^"]*\)".*/\1/p' <<<"$ANSWER")"
[[ -n "$TX_ID" ]] || die "create answered: $ANSWER"

STATE=""
for _ in $(seq 1 120); do
    STATE="$(curl -fsS -m 2 "$API/v1/transactions/$TX_ID" | sed -n 's/.*"state":"\([A-Z_]*\)".*/\1/p')"
    [[ "$STATE" == CONFIRMED ]] && break
    # Finality needs confirmations: anvil mines only on demand here.
    rpc evm_mine >/dev/null || true
    sleep 0.25
done
[[ "$STATE" == CONFIRMED ]] || die "transaction $TX_ID is $STATE, not CONFIRMED"
say "transaction $TX_ID CONFIRMED"

kill -TERM "$DEV_PID"
for _ in $(seq 1 120); do
    kill -0 "$DEV_PID" 2>/dev/null || break
    sleep 0.25
done
kill -0 "$DEV_PID" 2>/dev/null && die "dev.sh still running 30 s after SIGTERM"
wait "$DEV_PID" 2>/dev/null || true
DEV_PID=""
for _ in $(seq 1 40); do
    port_free "$ANVIL_PORT" && port_free "$API_PORT" && break
    sleep 0.25
done
port_free "$ANVIL_PORT" || die "anvil still listens on :$ANVIL_PORT after dev.sh stopped"
port_free "$API_PORT" || die "the daemon still listens on :$API_PORT after dev.sh stopped"
grep -q "stopping anvil" "$LOG" || die "dev.sh did not stop its anvil"
say "dev.sh stopped its daemon and anvil; ports free"
