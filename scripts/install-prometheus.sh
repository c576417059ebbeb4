#!/usr/bin/env bash
# Debian's `prometheus` package (the server and promtool): installed when
# missing and we may (root with apt-get), skipped when both are there.
set -euo pipefail
if command -v prometheus >/dev/null && command -v promtool >/dev/null; then
    exit 0
fi
if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null; then
    echo "installing Debian's prometheus package (prometheus, promtool)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
else
    echo "prometheus/promtool are missing: install Debian's prometheus package (apt-get install prometheus)" >&2
    exit 1
fi
