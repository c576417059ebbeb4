// The freshness check of the generated wire types: regenerates them from the
// daemon's OpenAPI document into a temporary file with the same generator and
// options as `npm run gen:types`, and fails when that differs from the
// committed file (then run `npm run gen:types` and commit the result).
//
//   node scripts/check-types.mjs ../openapi.json src/schema.d.ts
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const [document, committed] = process.argv.slice(2);
if (!document || !committed) {
    console.error("usage: check-types.mjs OPENAPI_JSON COMMITTED_SCHEMA_D_TS");
    process.exit(2);
}
if (!existsSync(document)) {
    console.error(`check:types: ${document} is missing (the daemon's GET /v1/openapi.json)`);
    process.exit(1);
}
const dir = mkdtempSync(join(tmpdir(), "txmgr-schema-"));
try {
    const fresh = join(dir, "schema.d.ts");
    execFileSync(join("node_modules", ".bin", "openapi-typescript"), [document, "-o", fresh], {
        stdio: ["ignore", "ignore", "inherit"],
    });
    const want = readFileSync(fresh, "utf8");
    const have = existsSync(committed) ? readFileSync(committed, "utf8") : "";
    if (want !== have) {
        const a = want.split("\n");
        const b = have.split("\n");
        let line = 0;
        while (line < a.length && a[line] === b[line]) line++;
        console.error(
            `check:types: ${committed} is stale: it differs from the types generated from ${document} ` +
                `from line ${line + 1} on:\n  generated: ${JSON.stringify(a[line] ?? "<end>")}\n  committed: ${JSON.stringify(b[line] ?? "<end>")}\n` +
                "run `npm run gen:types` and commit src/schema.d.ts",
        );
        process.exit(1);
    }
    console.log(`check:types: ${committed} is what ${document} generates`);
} finally {
    rmSync(dir, { recursive: true, force: true });
}
