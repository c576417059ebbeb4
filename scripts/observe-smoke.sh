#!/usr/bin/env bash
# Proves scripts/observe.sh on every test run: on free ports with a
# throw-away database, Prometheus scrapes the daemon (up == 1) with the
# shipped rules loaded; then SIGTERM stops all of it (ports free).
# scripts/test.sh calls this.
#
# Environment: DATABASE_URL (admin URL), DEV_PROFILE (cargo profile).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT="$PWD"

say() { printf 'observe-smoke: %s\n' "$*"; }
die() { say "FAILED: $*"; [[ -f "$LOG" ]] && tail -n 60 "$LOG" >&2; exit 1; }
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

ADMIN_URL="${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}"
ANVIL_PORT="$(free_port)"
API_PORT="$(free_port)"
PROM_PORT="$(free_port)"
DB="txmgr_observesmoke_$$"
LOG="$ROOT/.tools/observe-smoke.log"
DIR="$(mktemp -d)"
PROM="http://127.0.0.1:$PROM_PORT"
mkdir -p "$ROOT/.tools"

cleanup() {
    if [[ -n "${OBS_PID:-}" ]] && kill -0 "$OBS_PID" 2>/dev/null; then
        kill -TERM "$OBS_PID" 2>/dev/null || true
        wait "$OBS_PID" 2>/dev/null || true
    fi
    psql "$ADMIN_URL" -Xq -c "drop database if exists $DB with (force)" >/dev/null 2>&1 || true
    rm -rf "$DIR"
}
trap cleanup EXIT

say "scripts/observe.sh with the API on :$API_PORT, Prometheus on :$PROM_PORT (log: $LOG)"
DEV_PG_URL="$ADMIN_URL" DEV_DB="$DB" DEV_ANVIL_PORT="$ANVIL_PORT" \
    DEV_LISTEN="127.0.0.1:$API_PORT" DEV_PROFILE="${DEV_PROFILE:-release}" \
    OBSERVE_PROM_PORT="$PROM_PORT" OBSERVE_DIR="$DIR" \
    scripts/observe.sh >"$LOG" 2>&1 &
OBS_PID=$!

for _ in $(seq 1 600); do
    curl -fsS -m 2 "$PROM/api/v1/query?query=up%7Bjob%3D%22txmgr%22%7D%3D%3D1" 2>/dev/null |
        grep -q '"value"' && break
    kill -0 "$OBS_PID" 2>/dev/null || die "observe.sh exited early"
    sleep 0.5
done
curl -fsS -m 2 "$PROM/api/v1/query?query=up%7Bjob%3D%22txmgr%22%7D%3D%3D1" | grep -q '"value"' ||
    die "Prometheus does not scrape the daemon (up == 1) within 300 s"
curl -fsS -m 2 "$PROM/api/v1/rules" | grep -q '"name":"txmgr-alerts"' ||
    die "Prometheus did not load the shipped rules"
grep -q "Prometheus alerts   http://127.0.0.1:$PROM_PORT/alerts" "$LOG" || die "the URLs were not printed"
say "Prometheus scrapes the daemon with the shipped rules"

kill -TERM "$OBS_PID"
for _ in $(seq 1 120); do
    kill -0 "$OBS_PID" 2>/dev/null || break
    sleep 0.25
done
kill -0 "$OBS_PID" 2>/dev/null && die "observe.sh still running 30 s after SIGTERM"
wait "$OBS_PID" 2>/dev/null || true
OBS_PID=""
for _ in $(seq 1 40); do
    port_free "$ANVIL_PORT" && port_free "$API_PORT" && port_free "$PROM_PORT" && break
    sleep 0.25
done
for port in "$ANVIL_PORT" "$API_PORT" "$PROM_PORT"; do
    port_free "$port" || die "something still listens on :$port after observe.sh stopped"
done
say "observe.sh stopped the daemon, anvil and Prometheus; ports free"
