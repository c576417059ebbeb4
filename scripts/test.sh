#!/usr/bin/env bash
# The one test command: formatting, lints, then the whole test suite against
# real PostgreSQL and a pinned anvil. README and CI (.ci/run) call this.
#
#   scripts/test.sh            # everything
#   scripts/test.sh lease      # extra args go to the test runner (filter etc.)
#
# Environment:
#   DATABASE_URL            admin connection; tests create/drop their own DBs.
#                           Default postgres://postgres@127.0.0.1:5432/postgres.
#   TXMGR_TEST_PRIVATE_PG=1 always use a throw-away cluster under .tools/pg.
#   TXMGR_TEST_SKIP_LINT=1  skip fmt/clippy (quick local iteration).
#   NEXTEST_PROFILE         nextest profile (.config/nextest.toml), e.g. ci.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT="$PWD"

# Every section's wall time, printed at the end of every run (passed or
# failed), so a slow step shows which one it is.
SUITE_START=$SECONDS
SECTION_NAME=""
SECTION_START=$SECONDS
SECTION_TIMES=()
end_section() {
    [[ -n "$SECTION_NAME" ]] &&
        SECTION_TIMES+=("$(printf '%6ds  %s' $((SECONDS - SECTION_START)) "$SECTION_NAME")")
    SECTION_NAME=""
}
section() {
    end_section
    SECTION_NAME="$*"
    SECTION_START=$SECONDS
    printf '\n==== %s ====\n' "$*"
}
print_times() {
    end_section
    printf '\n==== wall time per section ====\n'
    printf '%s\n' "${SECTION_TIMES[@]}"
    printf '%6ds  total (%dm%02ds)\n' $((SECONDS - SUITE_START)) \
        $(((SECONDS - SUITE_START) / 60)) $(((SECONDS - SUITE_START) % 60))
}
die() { echo "test.sh: $*" >&2; exit 1; }

# ---------------------------------------------------------------- build cache
# One target directory outside the clone, shared by every clone on this
# machine and kept between runs: a fresh clone (as CI makes one) reuses the
# ~650 dependencies compiled by the last run instead of compiling them twice
# (check for clippy, build for the tests). Keyed by the toolchain, since a new
# rustc rebuilds everything anyway; cargo itself keys each artifact by version
# and features, so one directory serves several lock files. The workspace's
# own crates are rebuilt per clone (their artifacts are keyed by its path).
# A directory grown past TXMGR_TARGET_CAP_GB (default 40) is emptied first.
# An explicit CARGO_TARGET_DIR wins; TXMGR_SHARED_TARGET=0 keeps ./target.
# Two clones running the suite at the same time share `txmgr` binaries in
# that directory: give one of them its own CARGO_TARGET_DIR.
section "build cache"
if [[ -z "${CARGO_TARGET_DIR:-}" && "${TXMGR_SHARED_TARGET:-1}" == 1 ]]; then
    CACHE_ROOT="${XDG_CACHE_HOME:-$HOME/.cache}/txmgr"
    TOOLCHAIN_KEY="$(rustc -vV | sha256sum | cut -c1-16)"
    export CARGO_TARGET_DIR="$CACHE_ROOT/target-$TOOLCHAIN_KEY"
    mkdir -p "$CARGO_TARGET_DIR"
    # Directories of other toolchains are never reused: remove them.
    find "$CACHE_ROOT" -mindepth 1 -maxdepth 1 -name 'target-*' \
        ! -path "$CARGO_TARGET_DIR" -exec rm -rf {} +
    size_gb="$(du -s --block-size=1G "$CARGO_TARGET_DIR" | cut -f1)"
    if ((size_gb > ${TXMGR_TARGET_CAP_GB:-40})); then
        echo "the shared target directory holds ${size_gb} GiB: emptying it"
        rm -rf "$CARGO_TARGET_DIR" && mkdir -p "$CARGO_TARGET_DIR"
    fi
fi
echo "CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}"

# ---------------------------------------------------------------- anvil
section "anvil"
scripts/install-anvil.sh
export ANVIL_BIN="$ROOT/.tools/bin/anvil"

# ---------------------------------------------------------------- hardhat
# The core scenarios also run against Hardhat's node (EDR): other error texts
# and pool rules than anvil's (tests/it/common/hardhat.rs).
section "hardhat"
scripts/install-hardhat.sh
export TXMGR_HARDHAT_DIR="$ROOT/.tools/hardhat"

# ---------------------------------------------------------------- localstack
# The aws_kms signer is tested against LocalStack's KMS (no containers,
# loopback only; tests/it/common/kms.rs, testkit's LocalStack launcher).
section "localstack"
scripts/install-localstack.sh
export LOCALSTACK_PYTHON="$ROOT/.tools/localstack/bin/python"

# ---------------------------------------------------------------- promtool
# The metrics exposition is checked with Prometheus' own linter.
section "promtool"
scripts/install-prometheus.sh || die "promtool and prometheus are needed (tests/it/prometheus_alerts.rs too)"
promtool --version 2>&1 | head -n1
# The shipped alert and recording rules: valid, and each alert fires on its
# condition and not before (deploy/prometheus/txmgr-rules.test.yml).
promtool check rules deploy/prometheus/txmgr-rules.yml
(cd deploy/prometheus && promtool test rules txmgr-rules.test.yml)

# ---------------------------------------------------------------- chromium
# The ops dashboard is rendered in a real headless browser
# (tests/it/ops_dashboard.rs). Installed when we may; then the test must run
# (TXMGR_REQUIRE_CHROMIUM), so a missing browser cannot pass as a skip. In CI
# (CI=true) a browser that cannot be had fails the run here.
section "chromium"
chromium_bin() { command -v chromium || command -v chromium-browser || command -v google-chrome; }
if ! chromium_bin >/dev/null; then
    if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null; then
        echo "installing Debian's chromium package (headless, for the dashboard test)"
        if ! { apt-get update -qq &&
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null; }; then
            echo "installing chromium failed"
        fi
    fi
fi
if chromium_bin >/dev/null; then
    "$(chromium_bin)" --version 2>/dev/null | head -n1 || true
    export TXMGR_REQUIRE_CHROMIUM=1
elif [[ "${CI:-}" == true ]]; then
    die "no chromium and it could not be installed: the dashboard test cannot run, and in CI a skip is not a pass"
else
    echo "no chromium and no way to install it: the dashboard test is skipped (outside CI only)"
fi

# ---------------------------------------------------------------- softhsm2
# The pkcs11 signer is tested against SoftHSM2 (Debian `softhsm2`), its
# tokens and keys made with OpenSC's `pkcs11-tool` (`opensc`)
# (tests/it/pkcs11_signer.rs). Installed as root when missing; a machine
# that cannot have them fails the run (the tests fail, never skip).
section "softhsm2"
if ! { [[ -f /usr/lib/softhsm/libsofthsm2.so ]] && command -v softhsm2-util >/dev/null && command -v pkcs11-tool >/dev/null; }; then
    if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null; then
        echo "installing Debian's softhsm2 and opensc packages (the pkcs11 signer's tests)"
        { apt-get update -qq &&
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends softhsm2 opensc >/dev/null; } ||
            echo "installing softhsm2/opensc failed"
    fi
fi
[[ -f /usr/lib/softhsm/libsofthsm2.so ]] && command -v softhsm2-util >/dev/null && command -v pkcs11-tool >/dev/null ||
    die "softhsm2 and opensc are needed (tests/it/pkcs11_signer.rs): apt-get install softhsm2 opensc"
softhsm2-util --version | head -n1

# ---------------------------------------------------------------- postgres
DEFAULT_DATABASE_URL="postgres://postgres@127.0.0.1:5432/postgres"
DATABASE_URL_WAS_SET="${DATABASE_URL+yes}"
export DATABASE_URL="${DATABASE_URL:-$DEFAULT_DATABASE_URL}"

PG_DIR="$ROOT/.tools/pg"
PG_BIN=""
PG_USER=""     # unprivileged user that owns the cluster when we are root
PG_RUN=()      # prefix that runs server binaries as PG_USER
PG_STARTED=""

pg_reachable() {
    local url="$1"
    if command -v psql >/dev/null; then
        psql "$url" -XAtq -c 'select 1' >/dev/null 2>&1
    elif command -v pg_isready >/dev/null; then
        pg_isready -q -d "$url" >/dev/null 2>&1
    else
        # Without client tools we cannot probe; let the tests tell.
        return 0
    fi
}

port_free() {
    # Nothing accepting on the port => free enough for a throw-away cluster.
    ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

stop_private_pg() {
    if [[ -n "$PG_STARTED" ]]; then
        echo "stopping private PostgreSQL cluster"
        "${PG_RUN[@]}" "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -m immediate -w stop >/dev/null 2>&1 || true
        PG_STARTED=""
    fi
}
on_exit() {
    stop_private_pg
    print_times
}
trap on_exit EXIT

start_private_pg() {
    PG_BIN="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1 || true)"
    [[ -n "$PG_BIN" && -x "$PG_BIN/initdb" ]] ||
        die "PostgreSQL is not reachable at $DATABASE_URL and no server binaries (/usr/lib/postgresql/*/bin/initdb) to start one"

    # PostgreSQL refuses to run as root; run the cluster as an unprivileged user.
    if [[ "$(id -u)" == 0 ]]; then
        PG_USER=postgres
        if ! id "$PG_USER" >/dev/null 2>&1; then
            PG_USER=txmgr-pg
            id "$PG_USER" >/dev/null 2>&1 || useradd --system --no-create-home "$PG_USER"
        fi
        command -v runuser >/dev/null ||
            die "running as root but runuser is missing; cannot start PostgreSQL as $PG_USER"
        PG_RUN=(runuser -u "$PG_USER" --)
    fi

    local port=55432
    while ! port_free "$port"; do
        port=$((port + 1))
        ((port < 55532)) || die "no free port for a private PostgreSQL cluster"
    done

    echo "starting throw-away PostgreSQL cluster ($PG_BIN) in $PG_DIR on port $port"
    rm -rf "$PG_DIR"
    mkdir -p "$PG_DIR"
    if [[ -n "$PG_USER" ]]; then
        chown "$PG_USER" "$PG_DIR"
        # The server user must be able to traverse to .tools/pg.
        chmod o+x "$ROOT" "$ROOT/.tools" 2>/dev/null || true
    fi
    "${PG_RUN[@]}" "$PG_BIN/initdb" -D "$PG_DIR/data" -U postgres --auth=trust \
        --no-sync -E UTF8 >"$PG_DIR/initdb.log" 2>&1 ||
        { cat "$PG_DIR/initdb.log" >&2; die "initdb failed"; }
    # fsync off: the cluster is disposable and the suite is I/O heavy.
    "${PG_RUN[@]}" "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/server.log" -w -t 30 \
        -o "-p $port -c listen_addresses=127.0.0.1 -k $PG_DIR -c fsync=off \
            -c synchronous_commit=off -c full_page_writes=off -c max_connections=400" \
        start >/dev/null ||
        { cat "$PG_DIR/server.log" >&2; die "private PostgreSQL failed to start"; }
    PG_STARTED=yes
    export DATABASE_URL="postgres://postgres@127.0.0.1:$port/postgres"
    pg_reachable "$DATABASE_URL" || die "private PostgreSQL started but is not reachable"
}

section "postgres"
if [[ "${TXMGR_TEST_PRIVATE_PG:-}" == 1 ]]; then
    start_private_pg
elif pg_reachable "$DATABASE_URL"; then
    :
elif [[ -n "$DATABASE_URL_WAS_SET" ]]; then
    die "DATABASE_URL=$DATABASE_URL is set but not reachable"
else
    echo "PostgreSQL not reachable at $DATABASE_URL"
    start_private_pg
fi
echo "DATABASE_URL=$DATABASE_URL"
# The restore test (tests/it/restore.rs) dumps and restores a database with
# the client tools (Debian `postgresql-client`), installed as root when
# missing.
if ! { command -v pg_dump >/dev/null && command -v pg_restore >/dev/null; }; then
    if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null; then
        echo "installing Debian's postgresql-client (pg_dump, pg_restore)"
        { apt-get update -qq &&
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql-client >/dev/null; } ||
            echo "installing postgresql-client failed"
    fi
fi
command -v pg_dump >/dev/null && command -v pg_restore >/dev/null ||
    die "pg_dump and pg_restore are needed (tests/it/restore.rs): apt-get install postgresql-client"
pg_dump --version

# Statements written with sqlx's checked macros (`query!` & co.) are checked
# at build time against the committed `.sqlx/` data (offline mode: the build
# never reaches for a database); the check below proves `.sqlx/` is current
# against the migrations.
export SQLX_OFFLINE="${SQLX_OFFLINE:-true}"

# ---------------------------------------------------------------- checked SQL
# `cargo sqlx prepare --check` on a throw-away database migrated from
# migrations/: a query whose columns drifted from the schema, or a `.sqlx/`
# entry that is missing or stale, fails here. sqlx-cli is installed with
# `cargo install --locked` into $CARGO_HOME/bin when missing (fresh clones
# on the same machine reuse it).
SQLX_CLI_VERSION=0.8.6
section "sqlx prepare --check"
if ! cargo sqlx --version 2>/dev/null | grep -q "$SQLX_CLI_VERSION"; then
    echo "installing sqlx-cli $SQLX_CLI_VERSION (cargo install --locked)"
    cargo install sqlx-cli --version "$SQLX_CLI_VERSION" --locked \
        --no-default-features --features postgres,rustls
fi
PREPARE_DB="txmgr_sqlx_prepare_$$"
PREPARE_URL="${DATABASE_URL%/*}/$PREPARE_DB"
drop_prepare_db() { DATABASE_URL="$PREPARE_URL" sqlx database drop -y >/dev/null 2>&1 || true; }
DATABASE_URL="$PREPARE_URL" sqlx database create
DATABASE_URL="$PREPARE_URL" sqlx migrate run --source migrations >/dev/null
# `-- --all-targets`: the same targets (and so the same unified features of
# every dependency) as clippy below, so that clippy reuses this check's
# dependency artifacts instead of checking ~650 crates a second time.
if ! (SQLX_OFFLINE=false DATABASE_URL="$PREPARE_URL" cargo sqlx prepare --check --workspace -- --all-targets); then
    drop_prepare_db
    die ".sqlx/ is not current: run scripts/sqlx-prepare.sh and commit .sqlx/"
fi
drop_prepare_db

# ---------------------------------------------------------------- lint
if [[ "${TXMGR_TEST_SKIP_LINT:-}" != 1 ]]; then
    section "cargo fmt --check"
    cargo fmt --all -- --check

    section "cargo clippy"
    cargo clippy --workspace --all-targets -- -D warnings
fi

# ---------------------------------------------------------------- tests
# cargo-nextest runs the suite: its test groups keep the multi-process
# cluster tests and the feed tests one at a time (.config/nextest.toml), and
# it runs each test in its own process. Installed with `cargo install
# --locked` into $CARGO_HOME/bin when missing (fresh clones reuse it).
NEXTEST_VERSION=0.9.151
section "cargo-nextest"
if ! cargo nextest --version 2>/dev/null | grep -q "cargo-nextest $NEXTEST_VERSION"; then
    echo "installing cargo-nextest $NEXTEST_VERSION (cargo install --locked)"
    cargo install cargo-nextest --version "$NEXTEST_VERSION" --locked
fi
cargo nextest --version | head -n1

section "build the tests"
cargo nextest run --workspace --no-run

section "cargo nextest run --workspace $*"
# No exec: the EXIT trap must stop the private cluster.
cargo nextest run --workspace "$@"

# ---------------------------------------------------------------- README, API
# The README's run command, exactly as a user runs it (on free ports), and
# the API's conformance to its OpenAPI document against that same set-up.
# Skipped when the run is narrowed to some tests (extra arguments).
if [[ $# -eq 0 ]]; then
    section "scripts/dev.sh (the README's run command)"
    DEV_PROFILE=dev scripts/dev-smoke.sh

    # scripts/observe.sh: the same daemon with a local Prometheus and the
    # shipped rules (README "Alerts and dashboards").
    section "scripts/observe.sh (local observability stack)"
    DEV_PROFILE=dev scripts/observe-smoke.sh

    # The Debian package, from the binary the suite built (no second build):
    # install, check, remove, purge. Needs root and dpkg (as CI has).
    section "Debian package (install, check, remove)"
    if [[ "$(id -u)" == 0 ]] && command -v dpkg >/dev/null; then
        scripts/package-smoke.sh
    elif [[ "${CI:-}" == true ]]; then
        die "the package test needs root and dpkg, and in CI a skip is not a pass"
    else
        echo "not root or no dpkg: the package test is skipped (outside CI only)"
    fi

    # The API answers what GET /v1/openapi.json says: schemathesis (PyPI,
    # pinned, installed into .tools/) against a real daemon.
    section "API conformance (schemathesis)"
    DEV_PROFILE=dev scripts/api-conformance.sh

    # The TypeScript and Python SDKs (README "Clients"): each checks its
    # generated types or models against clients/openapi.json (which a Rust
    # test keeps equal to the served document), builds its package (npm
    # pack, a wheel) and runs its own suite against real daemons started by
    # its tests, from the binary the suite built. Node and npm come from the
    # machine; Python packages go to .tools/py-clients.
    section "doc examples of the client crates (txmgr-client, txmgr-api)"
    cargo test --doc -p txmgr-client -p txmgr-api

    CLIENT_ENV=(TXMGR_BIN="${CARGO_TARGET_DIR:-$ROOT/target}/debug/txmgr" ANVIL_BIN="$ANVIL_BIN" DATABASE_URL="$DATABASE_URL")
    section "TypeScript SDK (clients/typescript)"
    command -v npm >/dev/null || die "npm is needed for the TypeScript SDK's tests (Node 20 or later)"
    env "${CLIENT_ENV[@]}" clients/typescript/test.sh
    section "Python SDK (clients/python)"
    env "${CLIENT_ENV[@]}" clients/python/test.sh
fi

section "all checks passed"
