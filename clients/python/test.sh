#!/usr/bin/env bash
# The Python client's whole test run: venv (installs only what is missing),
# wheel build + install, OpenAPI freshness check, mypy --strict, then pytest
# against a real daemon, anvil and PostgreSQL (a fresh database, dropped at
# the end).
#
#   TXMGR_BIN=/work/bin/txmgr ANVIL_BIN=.tools/bin/anvil \
#   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres clients/python/test.sh
#
# TXMGR_BIN     the txmgr binary (`txmgr run --config FILE`)
# ANVIL_BIN     anvil
# DATABASE_URL  an admin URL of the PostgreSQL server (CREATE / DROP DATABASE)
# TXMGR_PY_VENV optional: the venv (default <repo>/.tools/py-clients)
# Extra arguments go to the last pytest run (e.g. -k webhook).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
started=$SECONDS

fail() {
    echo "clients/python/test.sh: $*" >&2
    exit 1
}

: "${TXMGR_BIN:?TXMGR_BIN must name the txmgr binary}"
: "${ANVIL_BIN:?ANVIL_BIN must name anvil}"
: "${DATABASE_URL:?DATABASE_URL must be an admin URL of PostgreSQL}"
[ -x "$TXMGR_BIN" ] || fail "TXMGR_BIN=$TXMGR_BIN is not an executable"
[ -x "$ANVIL_BIN" ] || fail "ANVIL_BIN=$ANVIL_BIN is not an executable"
for tool in python3 psql; do
    command -v "$tool" >/dev/null || fail "$tool is not installed"
done
openapi="$repo/clients/openapi.json"
[ -f "$openapi" ] || fail "$openapi is missing"
psql "$DATABASE_URL" -X -Atc 'select 1' >/dev/null || fail "PostgreSQL at DATABASE_URL does not answer"

# --- the venv: created once, packages installed only when missing ---------------------------
venv="${TXMGR_PY_VENV:-$repo/.tools/py-clients}"
python3 -c 'import sys; sys.exit(sys.version_info < (3, 10))' || fail "python3 is older than 3.10"
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
py="$venv/bin/python"
missing=()
for requirement in "httpx>=0.27" "pytest>=8" "build>=1" "hatchling>=1.18" "mypy>=1.10"; do
    "$py" - "$requirement" <<'EOF' || missing+=("$requirement")
import re, sys
from importlib.metadata import PackageNotFoundError, version
name, least = re.fullmatch(r"([A-Za-z0-9_.-]+)>=([0-9.]+)", sys.argv[1]).groups()
try:
    have = version(name)
except PackageNotFoundError:
    sys.exit(1)
as_tuple = lambda v: tuple(int(p) for p in re.findall(r"[0-9]+", v)[:3])
sys.exit(as_tuple(have) < as_tuple(least))
EOF
done
if [ "${#missing[@]}" -gt 0 ]; then
    echo "== installing ${missing[*]} into $venv"
    "$py" -m pip install --quiet --disable-pip-version-check "${missing[@]}"
fi

export PYTHONDONTWRITEBYTECODE=1
work="$(mktemp -d "${TMPDIR:-/tmp}/txmgr-py-test.XXXXXX")"
export TXMGR_PY_DB_NAME="txmgr_py_$$_${RANDOM}"
export TXMGR_PY_PIDS="$work/pids"
export TXMGR_PY_WORK="$work"
cleanup() {
    # Whatever pytest left behind if it was killed: its processes, its database.
    if [ -f "$TXMGR_PY_PIDS" ]; then
        while read -r pid; do kill -9 "$pid" 2>/dev/null || true; done <"$TXMGR_PY_PIDS"
    fi
    psql "$DATABASE_URL" -X -q -c "DROP DATABASE IF EXISTS \"$TXMGR_PY_DB_NAME\" WITH (FORCE)" \
        >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT

# --- the wheel: built with the standard backend, installed, then tested ---------------------
echo "== building the wheel"
"$py" -m build --wheel --no-isolation --outdir "$work/dist" "$here" >"$work/build.log" 2>&1 \
    || { cat "$work/build.log" >&2; fail "the wheel did not build"; }
wheels=("$work"/dist/txmgr_client-*.whl)
[ "${#wheels[@]}" -eq 1 ] && [ -f "${wheels[0]}" ] || fail "expected one wheel in $work/dist"
wheel="${wheels[0]}"
"$py" - "$wheel" <<'EOF'
import sys, zipfile
wheel = sys.argv[1]
with zipfile.ZipFile(wheel) as z:
    names = z.namelist()
    meta = z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
requires = [l.split(":", 1)[1].strip() for l in meta.splitlines() if l.startswith("Requires-Dist:")]
runtime = [r for r in requires if "extra ==" not in r]
assert runtime == ["httpx>=0.27"], f"runtime dependencies: {runtime}"
assert "txmgr_client/py.typed" in names, "py.typed is not in the wheel"
assert "Requires-Python: >=3.10" in meta
assert not [n for n in names if n.startswith("tests/") or "/tests/" in n], "tests in the wheel"
EOF
"$py" -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps "$wheel"
"$py" -m pip check >/dev/null || fail "pip check: the installed wheel's dependencies are not met"
echo "   $(basename "$wheel"): $(stat -c %s "$wheel") bytes, installed into $venv"

cd "$here"

# --- the hand-written models against the OpenAPI document ------------------------------------
echo "== OpenAPI freshness (clients/openapi.json)"
"$py" -m pytest -q -p no:cacheprovider tests/test_openapi.py -k document_file

# --- typing ------------------------------------------------------------------------------------
echo "== mypy --strict"
"$py" -m mypy --strict --cache-dir "$venv/mypy-cache" src/txmgr_client
# The tests, typed_usage.py among them: the installed wheel as a user's code
# sees it (py.typed, the overloads), not src/.
(cd tests && "$py" -m mypy --strict --cache-dir "$venv/mypy-cache-tests" .)

# --- unit tests and the daemon tests -------------------------------------------------------
echo "== pytest: unit tests, then the daemon tests"
"$py" -m pytest -q -p no:cacheprovider tests "$@"

echo "== clients/python: passed in $((SECONDS - started)) s"
