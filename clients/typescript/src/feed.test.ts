/**
 * The feed readers' cursor handling against a scripted source: `after: "end"`
 * is sent once, then replaced by the position it stood for (the beginning
 * while the feed was empty). The daemon's side of `after=end` is tested in
 * test/client.test.ts.
 */

import assert from "node:assert/strict";
import { test } from "node:test";

import { followFeed, waitFinalByFeed, type FeedQuery, type FeedSource } from "./feed.js";
import type { CompletionRow, FeedPage } from "./types.js";

/** A source answering `pages` in turn (the last one again once they run out), recording each query's `after`. */
function scripted(pages: FeedPage[]): FeedSource & { afters: (string | null | undefined)[] } {
    const afters: (string | null | undefined)[] = [];
    let next = 0;
    return {
        afters,
        async completions(query: FeedQuery): Promise<FeedPage> {
            afters.push(query.after);
            const page = pages[Math.min(next, pages.length - 1)]!;
            next += 1;
            return page;
        },
    };
}

function row(cursor: string, txId: string, state: CompletionRow["state"] = "CONFIRMED"): CompletionRow {
    return {
        cursor,
        chain_id: 31337,
        tx_id: txId,
        submitter: "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266",
        state,
        completed_at: "2025-01-01T00:00:00Z",
    } as CompletionRow;
}

test("follow from the end of an empty feed reads on from its beginning, not from a later end", async () => {
    const source = scripted([
        { items: [], next_after: null },
        { items: [row("7-1", "a")], next_after: "7-1" },
    ]);
    const follower = followFeed(source, { after: "end", waitSeconds: 1 });
    const first = await follower.next();
    await follower.return();
    assert.deepEqual(source.afters, ["end", undefined]);
    assert.equal(first.done, false);
    assert.deepEqual(first.value, { items: [row("7-1", "a")], after: "7-1" });
});

test("follow from the end of a feed with rows yields that position first, then reads after it", async () => {
    const source = scripted([
        { items: [], next_after: "5-3" },
        { items: [row("6-1", "a")], next_after: "6-1" },
    ]);
    const follower = followFeed(source, { after: "end", waitSeconds: 1 });
    const first = await follower.next();
    const second = await follower.next();
    await follower.return();
    assert.deepEqual(first.value, { items: [], after: "5-3" }, "the cursor to store");
    assert.equal(second.value?.after, "6-1");
    assert.deepEqual(source.afters, ["end", "5-3"]);
});

test("follow and waitFinal take null (feedEnd of an empty feed) as the beginning", async () => {
    const source = scripted([{ items: [row("7-1", "a")], next_after: "7-1" }]);
    const follower = followFeed(source, { after: null, waitSeconds: 1 });
    assert.equal((await follower.next()).value?.after, "7-1");
    await follower.return();
    const rows = await waitFinalByFeed(source, ["a"], 5_000, { after: null });
    assert.equal(rows.get("a")?.cursor, "7-1");
    assert.deepEqual(source.afters, [undefined, undefined]);
});

test("waitFinal by the feed from the end of an empty feed reads on from its beginning", async () => {
    const source = scripted([
        { items: [], next_after: null },
        { items: [row("7-1", "a"), row("7-2", "b", "FAILED_FINAL")], next_after: "7-2" },
    ]);
    const rows = await waitFinalByFeed(source, ["a", "b"], 5_000, { after: "end" });
    assert.deepEqual(source.afters, ["end", undefined]);
    assert.deepEqual(
        [...rows].map(([id, r]) => [id, r.state]),
        [
            ["a", "CONFIRMED"],
            ["b", "FAILED_FINAL"],
        ],
    );
});
