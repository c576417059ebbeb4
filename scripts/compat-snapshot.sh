#!/usr/bin/env bash
# Keeps a release's checked SQL statements for the upgrade compat check
# (README "Upgrading", tests/it/upgrade.rs): every `query!`-family statement
# of the release's `.sqlx/` data, with the columns, parameter types and
# nullability that release's build expects, in compat/<version>/queries.json.
# The test prepares each against the fully migrated schema of the current
# tree, so a migration that would break a node of that release still running
# fails CI before it ships. Run once per release:
#
#   scripts/compat-snapshot.sh <git revision of the release> <version>
#   e.g. scripts/compat-snapshot.sh v0.1.0 0.1.0
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
rev="${1:?git revision of the release}"
version="${2:?release version, e.g. 0.1.0}"
mkdir -p "compat/$version"
git ls-tree --name-only "$rev" .sqlx/ | python3 -c '
import json, subprocess, sys
rev = sys.argv[1]
out = []
for path in sorted(line.strip() for line in sys.stdin if line.strip().endswith(".json")):
    data = json.loads(subprocess.check_output(["git", "show", f"{rev}:{path}"]))
    d = data["describe"]
    out.append({
        "query": data["query"],
        "columns": [[c["name"], c["type_info"]] for c in d["columns"]],
        "parameters": d["parameters"],
        "nullable": d["nullable"],
    })
json.dump({"release": sys.argv[2], "revision": subprocess.check_output(["git", "rev-parse", rev]).decode().strip(), "statements": out}, sys.stdout, indent=1)
print()
' "$rev" "$version" > "compat/$version/queries.json"
echo "compat/$version/queries.json: $(grep -c '"query"' "compat/$version/queries.json") statements of $rev"
