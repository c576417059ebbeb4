#!/usr/bin/env bash
# Local development loop: a pinned anvil on 127.0.0.1:8545, a `txmgr`
# database on the local PostgreSQL, then the daemon (until Ctrl-C or
# SIGTERM, which stop the daemon and the anvil started here).
#
# Environment (defaults in brackets; scripts/dev-smoke.sh uses them to run
# this very script on free ports):
#   DEV_PG_URL       admin URL used to create the database
#                    [postgres://postgres@127.0.0.1:5432/postgres]
#   DEV_DB           database name [txmgr]
#   DEV_ANVIL_PORT   anvil's port on 127.0.0.1 [8545]
#   DEV_BLOCK_TIME   seconds between anvil's blocks [1]: finality (12
#                    confirmations) then comes on its own, ~13 s after a send
#   DEV_LISTEN       the API's listen address [config.toml's http.listen]
#   DEV_CONFIG       config file passed to `txmgr run` [config.toml]
#   DEV_PROFILE      cargo profile the daemon is built with [release]
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT="$PWD"

ANVIL_HOST=127.0.0.1
ANVIL_PORT="${DEV_ANVIL_PORT:-8545}"
BLOCK_TIME="${DEV_BLOCK_TIME:-1}"
ANVIL_URL="http://$ANVIL_HOST:$ANVIL_PORT"
DEV_PG_URL="${DEV_PG_URL:-postgres://postgres@127.0.0.1:5432/postgres}"
DEV_DB="${DEV_DB:-txmgr}"
DEV_PROFILE="${DEV_PROFILE:-release}"
DEV_CONFIG="${DEV_CONFIG:-config.toml}"

say() { printf 'dev.sh: %s\n' "$*"; }

chain_id_at() {
    curl -fsS -m 2 -H 'content-type: application/json' \
        --data '{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}' \
        "$1" 2>/dev/null | sed -n 's/.*"result":"\([^"]*\)".*/\1/p'
}

scripts/install-anvil.sh

ANVIL_PID=""
stop_anvil() {
    if [[ -n "$ANVIL_PID" ]] && kill -0 "$ANVIL_PID" 2>/dev/null; then
        say "stopping anvil (pid $ANVIL_PID)"
        kill "$ANVIL_PID" 2>/dev/null || true
        wait "$ANVIL_PID" 2>/dev/null || true
    fi
}
trap stop_anvil EXIT
trap 'exit 130' INT TERM

existing="$(chain_id_at "$ANVIL_URL" || true)"
if [[ -n "$existing" ]]; then
    say "something already answers at $ANVIL_URL (chain id $existing); using it"
else
    say "starting anvil on $ANVIL_URL (chain id 31337, a block every ${BLOCK_TIME} s), log: .tools/anvil-$ANVIL_PORT.log"
    "$ROOT/.tools/bin/anvil" --host "$ANVIL_HOST" --port "$ANVIL_PORT" --chain-id 31337 --block-time "$BLOCK_TIME" \
        >"$ROOT/.tools/anvil-$ANVIL_PORT.log" 2>&1 &
    ANVIL_PID=$!
    for _ in $(seq 1 100); do
        [[ -n "$(chain_id_at "$ANVIL_URL" || true)" ]] && break
        kill -0 "$ANVIL_PID" 2>/dev/null || { cat "$ROOT/.tools/anvil-$ANVIL_PORT.log" >&2; exit 1; }
        sleep 0.2
    done
    [[ -n "$(chain_id_at "$ANVIL_URL" || true)" ]] ||
        { say "anvil did not answer within 20s"; exit 1; }
fi

say "ensuring database '$DEV_DB' exists ($DEV_PG_URL)"
if [[ "$(psql "$DEV_PG_URL" -XAtq -c "select 1 from pg_database where datname = '$DEV_DB'")" != 1 ]]; then
    psql "$DEV_PG_URL" -Xq -c "create database $DEV_DB"
    say "created database '$DEV_DB'"
fi

# anvil's first well-known dev account (public test key, never for real funds).
export TXMGR_DEV_PRIVATE_KEY=0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80

# Point the daemon at what was set up here (environment overrides config.toml).
export TXMGR_CHAIN__RPC_URL="$ANVIL_URL"
export TXMGR_DATABASE__URL="${DEV_PG_URL%/*}/$DEV_DB"
if [[ -n "${DEV_LISTEN:-}" ]]; then
    export TXMGR_HTTP__LISTEN="$DEV_LISTEN"
fi
API="http://${DEV_LISTEN:-127.0.0.1:8080}"

cat <<USAGE
dev.sh: once the daemon logs "txmgr node started", try (from another shell):

  curl -sS -X POST $API/v1/transactions \\
       -H 'content-type: application/json' \\
       -d '{"submitter":"0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266",
            "to":"0x70997970c51812dc3a010c7d01b50e0d17dc79c8",
            "value":"1000000000000000", "request_id":"hello-1"}'

  curl -sS $API/v1/transactions/<tx_id from the answer>

USAGE
say "running: cargo run --profile $DEV_PROFILE --bin txmgr -- run --config $DEV_CONFIG"
# Not exec: the EXIT trap must stop the anvil we started once the daemon
# ends. The daemon runs in the background so that a SIGTERM or SIGINT to
# this script reaches it (bash defers traps while a foreground child runs).
cargo run --profile "$DEV_PROFILE" --bin txmgr -- run --config "$DEV_CONFIG" &
DAEMON_PID=$!
stop_daemon() {
    if kill -0 "$DAEMON_PID" 2>/dev/null; then
        kill -TERM "$DAEMON_PID" 2>/dev/null || true
        wait "$DAEMON_PID" 2>/dev/null || true
    fi
}
trap 'stop_daemon; exit 130' INT TERM
wait "$DAEMON_PID"
