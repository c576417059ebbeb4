#!/usr/bin/env bash
# Proves the Debian package (README "Install") on every test run, as root
# where dpkg exists: packages the binary the suite already built (no second
# build), installs it, runs `txmgr --version` and `txmgr config check` on the
# installed configuration as the service user, verifies the unit with
# `systemd-analyze verify` and its exposure with `systemd-analyze security`
# (at most 2.0), then `dpkg -r` must leave no process and no file
# but the conffiles, and `dpkg --purge` nothing at all.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

say() { printf 'package-smoke: %s\n' "$*"; }
die() { say "FAILED: $*"; exit 1; }

# systemd-analyze (verify, security) comes with Debian's systemd package.
if ! command -v systemd-analyze >/dev/null; then
    say "installing systemd (for systemd-analyze)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq systemd >/dev/null
fi

DEB="$(PACKAGE_PROFILE="${PACKAGE_PROFILE:-dev}" scripts/package.sh --no-build)"
[[ -f "$DEB" ]] || die "no package built: $DEB"
say "built $DEB ($(du -h "$DEB" | cut -f1))"
info="$(dpkg-deb --info "$DEB")"
grep -q "Package: txmgr" <<<"$info" || die "not a txmgr package"
contents="$(dpkg-deb --contents "$DEB")"
for path in ./usr/bin/txmgr ./etc/txmgr/config.toml ./etc/txmgr/txmgr.env \
    ./usr/share/txmgr/prometheus/txmgr-rules.yml ./usr/share/txmgr/grafana/txmgr.json \
    txmgr.service; do
    grep -q "$path" <<<"$contents" || die "the package lacks $path"
done
conffiles="$(dpkg-deb --ctrl-tarfile "$DEB" | tar -xO ./conffiles)"
grep -q /etc/txmgr/config.toml <<<"$conffiles" || die "/etc/txmgr/config.toml is not a conffile"

dpkg -i "$DEB" >/dev/null
UNIT="$(dpkg -L txmgr | grep '/systemd/system/txmgr.service$')"
/usr/bin/txmgr --version
id txmgr >/dev/null || die "no txmgr user"
[[ "$(stat -c '%U:%G %a' /etc/txmgr/txmgr.env)" == "root:txmgr 640" ]] ||
    die "/etc/txmgr/txmgr.env is $(stat -c '%U:%G %a' /etc/txmgr/txmgr.env), not root:txmgr 640"
runuser -u txmgr -- /usr/bin/txmgr config check --config /etc/txmgr/config.toml >/dev/null ||
    die "txmgr config check fails on the installed configuration"
systemd-analyze verify "$UNIT" || die "systemd-analyze verify $UNIT"
# The unit's hardening, as systemd scores it (0 = locked down, 10 = exposed):
# at most 2.0, and no core dump of a process holding signer keys.
exposure="$(systemd-analyze security --offline=true "$UNIT" 2>&1 |
    sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p')"
[[ -n "$exposure" ]] || die "systemd-analyze security printed no exposure level for $UNIT"
systemd-analyze security --offline=true --threshold=20 "$UNIT" >/dev/null ||
    die "systemd-analyze security: $UNIT is exposed $exposure, above 2.0"
grep -qx 'LimitCORE=0' "$UNIT" || die "$UNIT allows core dumps (LimitCORE=0 missing)"
say "systemd-analyze security: exposure $exposure (at most 2.0)"
say "installed: binary, user, configuration and unit check out"

dpkg -r txmgr >/dev/null
pgrep -f /usr/bin/txmgr >/dev/null && die "a txmgr process is left after dpkg -r"
for path in /usr/bin/txmgr "$UNIT" /usr/share/txmgr /usr/share/doc/txmgr; do
    [[ -e "$path" ]] && die "$path is left after dpkg -r"
done
[[ -f /etc/txmgr/config.toml ]] || die "dpkg -r removed the conffile /etc/txmgr/config.toml"
dpkg --purge txmgr >/dev/null
[[ -e /etc/txmgr ]] && die "/etc/txmgr is left after dpkg --purge"
id txmgr >/dev/null 2>&1 && die "the txmgr user is left after dpkg --purge"
say "dpkg -r left only the conffiles; dpkg --purge left nothing"
