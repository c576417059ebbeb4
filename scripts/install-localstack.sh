#!/usr/bin/env bash
# Install a pinned LocalStack (its KMS emulator, run without containers),
# reached as .tools/localstack, for the tests of the aws_kms signer
# (tests/it/common/localstack.rs starts it on a loopback port per test).
#
# LocalStack 2026.3 needs Python >= 3.13 (it imports warnings.deprecated);
# the first of python3.14, python3.13, pyenv's 3.13+ interpreters and
# python3 that is new enough is used. The
# pins besides localstack-core keep its runtime importable (newer releases of
# these packages changed APIs it uses). Idempotent: does nothing when the
# venv already holds the pin.
set -euo pipefail

LOCALSTACK_VERSION="2026.3.0"

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT="$PWD"
# The venv lives outside the clone, one per pinned version, and
# .tools/localstack links to it: a fresh clone on the same machine (as CI
# makes one) reuses it instead of spending a minute and a half installing
# ~150 packages again. TXMGR_TOOLS_CACHE moves it.
CACHE="${TXMGR_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/txmgr}"
VENV="$CACHE/localstack-$LOCALSTACK_VERSION"
LINK="$ROOT/.tools/localstack"

say() { printf 'install-localstack: %s\n' "$*"; }

link_venv() {
    mkdir -p "$ROOT/.tools"
    if [[ -L "$LINK" || ! -e "$LINK" ]]; then
        ln -sfn "$VENV" "$LINK"
    else
        # A venv of an older script in the clone itself: replace it.
        rm -rf "$LINK" && ln -s "$VENV" "$LINK"
    fi
}

if [[ -x "$VENV/bin/python" ]] \
    && "$VENV/bin/python" -c "import importlib.metadata as m, sys; sys.exit(sys.version_info < (3, 13) or m.version('localstack-core') != '$LOCALSTACK_VERSION')" 2>/dev/null; then
    link_venv
    say "localstack-core $LOCALSTACK_VERSION already installed in $VENV"
    exit 0
fi

candidates=(python3.14 python3.13)
if command -v pyenv >/dev/null; then
    for interpreter in "$(pyenv root)"/versions/3.1[3-9]*/bin/python3; do
        [[ -x "$interpreter" ]] && candidates+=("$interpreter")
    done
fi
candidates+=(python3)
PYTHON=""
for candidate in "${candidates[@]}"; do
    if "$candidate" -c 'import sys, ensurepip; sys.exit(sys.version_info < (3, 13))' 2>/dev/null; then
        PYTHON="$candidate"
        break
    fi
done
[[ -n "$PYTHON" ]] || { say "LocalStack needs Python >= 3.13 with venv support; none found" >&2; exit 1; }

say "installing localstack-core $LOCALSTACK_VERSION into $VENV (with $("$PYTHON" --version))"
rm -rf "$VENV"
mkdir -p "$CACHE"
"$PYTHON" -m venv "$VENV"
"$VENV/bin/pip" install -q --disable-pip-version-check \
    "localstack-core[runtime]==$LOCALSTACK_VERSION" \
    "cbor2<5.7" "pyopenssl<24.3" "cryptography<44" "service_identity<24.3"
"$VENV/bin/python" -c "import localstack.aws.components" || { say "the installed LocalStack does not import" >&2; exit 1; }
link_venv
say "installed"
