#!/usr/bin/env bash
# A local observability stack: scripts/dev.sh's daemon (anvil, database,
# txmgr) plus a local Prometheus (Debian's `prometheus`) scraping it every
# 5 s with the shipped rules (deploy/prometheus/txmgr-rules.yml). Prints the
# ops page, Prometheus' alerts page and its targets; Ctrl-C (or SIGTERM)
# stops all of it.
#
# Environment: everything dev.sh takes (DEV_PG_URL, DEV_DB, DEV_ANVIL_PORT,
# DEV_LISTEN, DEV_CONFIG, DEV_PROFILE), and
#   OBSERVE_PROM_PORT  Prometheus' port on 127.0.0.1 [9090]
#   OBSERVE_DIR        Prometheus' configuration and data [.tools/observe]
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT="$PWD"

say() { printf 'observe.sh: %s\n' "$*"; }

PROM_PORT="${OBSERVE_PROM_PORT:-9090}"
DIR="${OBSERVE_DIR:-$ROOT/.tools/observe}"
LISTEN="${DEV_LISTEN:-127.0.0.1:8080}"
mkdir -p "$DIR"

scripts/install-prometheus.sh

cat >"$DIR/prometheus.yml" <<YAML
global:
  scrape_interval: 5s
  evaluation_interval: 5s
rule_files:
  - "$ROOT/deploy/prometheus/txmgr-rules.yml"
scrape_configs:
  - job_name: txmgr
    static_configs:
      - targets: ["$LISTEN"]
YAML

DEV_PID=""
PROM_PID=""
stop_all() {
    if [[ -n "$PROM_PID" ]] && kill -0 "$PROM_PID" 2>/dev/null; then
        say "stopping prometheus (pid $PROM_PID)"
        kill -TERM "$PROM_PID" 2>/dev/null || true
        wait "$PROM_PID" 2>/dev/null || true
    fi
    if [[ -n "$DEV_PID" ]] && kill -0 "$DEV_PID" 2>/dev/null; then
        say "stopping dev.sh (pid $DEV_PID)"
        kill -TERM "$DEV_PID" 2>/dev/null || true
        wait "$DEV_PID" 2>/dev/null || true
    fi
}
trap stop_all EXIT
trap 'exit 130' INT TERM

say "starting prometheus on 127.0.0.1:$PROM_PORT (log: $DIR/prometheus.log)"
prometheus --config.file="$DIR/prometheus.yml" --storage.tsdb.path="$DIR/data" \
    --web.listen-address="127.0.0.1:$PROM_PORT" >"$DIR/prometheus.log" 2>&1 &
PROM_PID=$!

DEV_LISTEN="$LISTEN" scripts/dev.sh &
DEV_PID=$!

cat <<URLS
observe.sh: once the daemon logs "txmgr node started":
  ops page            http://$LISTEN/ops/
  metrics             http://$LISTEN/metrics
  Prometheus alerts   http://127.0.0.1:$PROM_PORT/alerts
  Prometheus targets  http://127.0.0.1:$PROM_PORT/targets
  Prometheus rules    http://127.0.0.1:$PROM_PORT/rules
Ctrl-C stops the daemon, anvil and Prometheus.
URLS
# Whichever ends first ends the stack.
wait -n "$DEV_PID" "$PROM_PID" || true
