/**
 * The client against a real daemon: retries and errors (429 waited out, 4xx
 * thrown at once), `feedEnd` (empty feed, after a completion), `waitFinal`
 * by GETs and by the feed from a `feedEnd` cursor, and the feed follower
 * resuming from a stored cursor.
 */

import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import {
    TxmgrClient,
    TxmgrError,
    WaitTimeoutError,
    type CompletionRow,
    type ErrorCode,
    type FeedBatch,
} from "@txmgr/client";

import { DEV_KEYS, Fixture, SINK, eventually, newToken, recordingFetch, type Exchange } from "./harness.js";

const SUBMITTER = DEV_KEYS[0]![1];
/** A contract whose code is `PUSH1 0 PUSH1 0 REVERT`: every call reverts. */
const REVERTER = "0x00000000000000000000000000000000000be7e7";
const svc = newToken("svc");
const limited = newToken("limited", "rate = { creates_per_second = 1, burst = 1 }");
let fx: Fixture;

before(async () => {
    fx = await Fixture.start({ name: "client", tokens: [svc, limited] });
    await fx.anvil.rpc("anvil_setCode", [REVERTER, "0x60006000fd"]);
});

after(async () => {
    await fx?.close();
});

function client(token = svc.token, log?: Exchange[]): TxmgrClient {
    return new TxmgrClient({ baseUrl: fx.daemon.base, token, fetch: log === undefined ? undefined : recordingFetch(log) });
}

/** The error a promise rejects with (fails when it resolves). */
async function rejection(promise: Promise<unknown>): Promise<unknown> {
    return promise.then(
        (value) => assert.fail(`resolved with ${JSON.stringify(value)}`),
        (error: unknown) => error,
    );
}

/** The feed's end as paging it from the beginning finds it: the cursor after every row there is now. */
async function pagedEnd(txmgr: TxmgrClient): Promise<string | undefined> {
    let after: string | undefined;
    for (;;) {
        const page = await txmgr.completions({ after, limit: 1000 });
        if (page.items.length === 0) return page.next_after ?? after;
        after = page.next_after ?? after;
    }
}

/** A feed cursor as a comparable pair. */
function cursorKey(cursor: string): [bigint, bigint] {
    const [xid, seq] = cursor.split("-");
    return [BigInt(xid!), BigInt(seq!)];
}

function before_(a: string, b: string): boolean {
    const [ax, as] = cursorKey(a);
    const [bx, bs] = cursorKey(b);
    return ax < bx || (ax === bx && as < bs);
}

test("feedEnd of a fresh daemon's empty feed is null; completions from the end answer nothing", async () => {
    await fx.logged(async () => {
        const log: Exchange[] = [];
        const txmgr = client(svc.token, log);
        assert.equal(await txmgr.feedEnd(), null);
        assert.deepEqual(log.map((e) => [e.method, e.path, e.status]), [["GET", "/v1/completions?after=end&limit=1", 200]]);
        const page = await txmgr.completions({ after: "end" });
        assert.deepEqual([page.items, page.next_after ?? null], [[], null]);
    })();
});

test("a 429 with Retry-After is waited out; with a lower cap it is thrown with its retryAfter", async () => {
    await fx.logged(async () => {
        const log: Exchange[] = [];
        const txmgr = client(limited.token, log);
        const first = await txmgr.create({ submitter: SUBMITTER, to: SINK, value: 1n, request_id: "rate-1" });
        assert.equal(first.replayed, false);
        assert.equal(log.length, 1);

        // The token's bucket (1 a second, burst 1) is empty: 429, then the same create after Retry-After.
        const second = await txmgr.create({ submitter: SUBMITTER, to: SINK, value: 1n, request_id: "rate-2" });
        assert.equal(second.replayed, false);
        const attempts = log.slice(1);
        assert.deepEqual(
            attempts.map((e) => e.status),
            [429, 202],
        );
        const retryAfter = Number(attempts[0]!.retryAfter);
        assert.ok(retryAfter >= 1, `Retry-After ${attempts[0]!.retryAfter}`);
        const waited = attempts[1]!.at - attempts[0]!.at;
        assert.ok(waited >= retryAfter * 1000, `retried after ${waited} ms, Retry-After ${retryAfter} s`);
        assert.equal(attempts[0]!.body, attempts[1]!.body, "the retry sent the same body (same request_id)");

        // A caller that waits at most 0 ms gets the 429 as an error, after one attempt.
        const before = log.length;
        const error = await rejection(
            txmgr.create({ submitter: SUBMITTER, to: SINK, value: 1n, request_id: "rate-3" }, { retry: { maxRetryAfterMs: 0 } }),
        );
        assert.ok(error instanceof TxmgrError, String(error));
        assert.equal(error.status, 429);
        const code: ErrorCode | string = error.code;
        assert.equal(code, "rate_limited");
        assert.ok(error.retryAfter !== undefined && error.retryAfter >= 1);
        assert.equal(error.requestId, "rate-3");
        assert.equal(log.length - before, 1);
    })();
});

test("a 4xx is thrown after exactly one attempt, with its code and field", async () => {
    await fx.logged(async () => {
        const log: Exchange[] = [];
        const txmgr = client(svc.token, log);
        const cases: { input: Parameters<TxmgrClient["create"]>[0]; status: number; code: ErrorCode; field?: string }[] = [
            { input: { submitter: SUBMITTER, to: SINK, value: "-1" }, status: 400, code: "invalid_request", field: "value" },
            { input: { submitter: SUBMITTER, to: "0x1234" }, status: 400, code: "invalid_request", field: "to" },
            { input: { submitter: SUBMITTER, to: SINK, gas_limit: 20_999 }, status: 400, code: "invalid_request", field: "gas_limit" },
            { input: { submitter: SUBMITTER, to: SINK, request_id: "txmgr-mine" }, status: 400, code: "invalid_request", field: "request_id" },
            { input: { submitter: DEV_KEYS[2]![1], to: SINK }, status: 422, code: "unknown_submitter" },
        ];
        for (const { input, status, code, field } of cases) {
            const before = log.length;
            const error = await rejection(txmgr.create(input));
            assert.ok(error instanceof TxmgrError, String(error));
            assert.deepEqual([error.status, error.code, error.field], [status, code, field], error.message);
            assert.equal(log.length - before, 1, `${code}: one attempt`);
        }

        // The same request_id with another body: 409 naming request_id and the intent that holds it.
        const stored = await txmgr.create({ submitter: SUBMITTER, to: SINK, value: 5n, request_id: "conflict-1" });
        const before = log.length;
        const conflict = await rejection(txmgr.create({ submitter: SUBMITTER, to: SINK, value: 6n, request_id: "conflict-1" }));
        assert.ok(conflict instanceof TxmgrError);
        assert.deepEqual([conflict.status, conflict.code, conflict.field, conflict.txId], [409, "idempotency_conflict", "request_id", stored.tx_id]);
        assert.equal(log.length - before, 1);
        // The same body again: the stored intent, answered 200.
        const replay = await txmgr.create({ submitter: SUBMITTER, to: SINK, value: 5n, request_id: "conflict-1" });
        assert.deepEqual([replay.replayed, replay.tx_id], [true, stored.tx_id]);

        // Reads: 404 not_found for an id of now no intent has; aged_out for one older than
        // history.retain (30 days); 400 naming tx_id; a bad token 401.
        const now = Date.now().toString(16).padStart(12, "0");
        const missing = await rejection(txmgr.get(`${now.slice(0, 8)}-${now.slice(8)}-7000-8000-000000000000`));
        assert.ok(missing instanceof TxmgrError);
        assert.deepEqual([missing.status, missing.code], [404, "not_found"]);
        const old = await rejection(txmgr.get("0190a0a0-0000-7000-8000-000000000000"));
        assert.ok(old instanceof TxmgrError);
        assert.deepEqual([old.status, old.code], [404, "aged_out"]);
        const badId = await rejection(txmgr.get("nope"));
        assert.ok(badId instanceof TxmgrError);
        assert.deepEqual([badId.status, badId.code, badId.field], [400, "invalid_request", "tx_id"]);
        const unauthorized = await rejection(client("0".repeat(64)).get(stored.tx_id));
        assert.ok(unauthorized instanceof TxmgrError);
        assert.deepEqual([unauthorized.status, unauthorized.code], [401, "unauthorized"]);
    })();
});

test("waitFinal: CONFIRMED for a transfer, FAILED_FINAL for a reverting call; many ids by the feed", async () => {
    await fx.logged(async () => {
        const txmgr = client();
        // An earlier completion, and every intent of the earlier tests final with its row served
        // (read by the feed from its beginning): the feed's end is past them and stays put.
        const earlier = await txmgr.create({ submitter: SUBMITTER, to: SINK, value: 1n, request_id: "earlier-1" });
        const existing: string[] = [];
        for await (const tx of txmgr.listAll({ submitter: SUBMITTER })) existing.push(tx.tx_id);
        assert.ok(existing.includes(earlier.tx_id));
        const settled = await txmgr.waitFinal(existing, 60_000);
        const earlierRow = settled.get(earlier.tx_id);
        assert.ok(earlierRow !== undefined && earlierRow.state === "CONFIRMED", JSON.stringify(earlierRow));

        const start = await txmgr.feedEnd();
        assert.ok(start !== null, "a feed with rows has an end");
        assert.ok(!before_(start, earlierRow.cursor), `the end ${start} is not before the earlier row ${earlierRow.cursor}`);
        assert.equal(start, await pagedEnd(txmgr), "the end paging from the beginning reaches");
        const fromEnd = await txmgr.completions({ after: "end" });
        assert.deepEqual([fromEnd.items.length, fromEnd.next_after], [0, start], "nothing after the end; next_after is the end");

        const ok = await txmgr.create({ submitter: SUBMITTER, to: SINK, value: 10n ** 15n });
        const reverting = await txmgr.create({ submitter: SUBMITTER, to: REVERTER, data: "0x", gas_limit: 60_000 });

        // Too short a wait: WaitTimeoutError with what it knows.
        const early = await rejection(txmgr.waitFinal(ok.tx_id, 1));
        assert.ok(early instanceof WaitTimeoutError, String(early));
        assert.deepEqual(early.pending, [ok.tx_id]);

        // Many ids: long polls of the feed from a cursor taken before the creates, no GET per id.
        const feedLog: Exchange[] = [];
        const many = client(svc.token, feedLog).waitFinal([ok.tx_id, reverting.tx_id], 60_000, { after: start });
        // One id: GETs with backoff.
        const getLog: Exchange[] = [];
        const byGets = client(svc.token, getLog);
        const [rows, confirmed, failed] = await Promise.all([
            many,
            byGets.waitFinal(ok.tx_id, 60_000, { pollInitialMs: 100, pollMaxMs: 500 }),
            byGets.waitFinal(reverting.tx_id, 60_000, { pollInitialMs: 100, pollMaxMs: 500 }),
        ]);

        assert.equal(confirmed.state, "CONFIRMED");
        assert.equal(confirmed.receipt?.status, 1);
        assert.equal(failed.state, "FAILED_FINAL");
        assert.equal(failed.receipt?.status, 0);
        assert.ok(getLog.every((e) => e.method === "GET" && e.path.startsWith("/v1/transactions/")));

        assert.equal(rows.get(ok.tx_id)?.state, "CONFIRMED");
        assert.equal(rows.get(reverting.tx_id)?.state, "FAILED_FINAL");
        assert.equal(rows.get(ok.tx_id)?.tx_hash, confirmed.mined_tx_hash ?? confirmed.tx_hash);
        assert.deepEqual([...rows.keys()].sort(), [ok.tx_id, reverting.tx_id].sort());
        for (const row of rows.values()) assert.ok(before_(start, row.cursor), `${row.cursor} is after the start ${start}`);
        assert.ok(feedLog.length >= 1);
        for (const e of feedLog) assert.match(e.path, /^\/v1\/completions\?/, "only feed reads");
        assert.equal(new URL(feedLog[0]!.path, "http://x").searchParams.get("after"), start, "read from the cursor taken");
    })();
});

test("the feed follower resumes from a stored cursor without a gap or a repeat", async () => {
    await fx.logged(async () => {
        const txmgr = client();
        let stored = await txmgr.feedEnd();
        const ours = new Set<string>();
        const create = async (n: number): Promise<void> => {
            for (let i = 0; i < n; i++) ours.add((await txmgr.create({ submitter: SUBMITTER, to: SINK, value: BigInt(i + 1) })).tx_id);
        };
        const seen: CompletionRow[] = [];
        /** Follows from `stored` (pages of 2), storing each batch's cursor, until `enough` says stop. */
        const follow = async (enough: () => boolean): Promise<void> => {
            const stop = new AbortController();
            const timer = setTimeout(() => stop.abort(new Error("follower timed out")), 60_000);
            try {
                for await (const batch of txmgr.follow({ after: stored, limit: 2, waitSeconds: 5, signal: stop.signal }) as AsyncGenerator<FeedBatch>) {
                    seen.push(...batch.items);
                    stored = batch.after; // "with the data": here, the same variable
                    if (enough()) break;
                }
            } finally {
                clearTimeout(timer);
            }
            assert.equal(stop.signal.aborted, false, "the follower got what it waited for");
        };

        await create(4);
        // The first follower stops after its first batch with one of ours.
        await follow(() => seen.some((row) => ours.has(row.tx_id ?? "")));
        const firstRun = seen.length;
        await create(3);
        // The second one starts from the stored cursor and reads until every intent's row came.
        await follow(() => [...ours].every((id) => seen.some((row) => row.tx_id === id && row.state === "CONFIRMED")));

        assert.ok(firstRun >= 1 && firstRun < 7, `first run saw ${firstRun} rows`);
        const cursors = seen.map((row) => row.cursor);
        assert.equal(new Set(cursors).size, cursors.length, "no row twice");
        for (let i = 1; i < cursors.length; i++) assert.ok(before_(cursors[i - 1]!, cursors[i]!), `feed order at ${i}`);
        const mine = seen.filter((row) => ours.has(row.tx_id ?? ""));
        assert.equal(mine.length, 7, "each of the 7 intents once, nothing missing");
        assert.deepEqual(new Set(mine.map((row) => row.tx_id)), ours);
        assert.ok(mine.every((row) => row.state === "CONFIRMED"));
        assert.equal(stored, cursors.at(-1), "the stored cursor is the last row read");

        // From the stored cursor there is nothing new: an empty page that keeps it.
        const rest = await txmgr.completions({ after: stored });
        assert.deepEqual([rest.items.length, rest.next_after], [0, stored]);
    })();
});

test("cancel, speedUp and rebroadcast act on a sent transaction; a repeated cancel is unchanged; a final one refuses them", async () => {
    await fx.logged(async () => {
        const log: Exchange[] = [];
        const txmgr = client(svc.token, log);
        // No blocks while the actions are asked for: the transaction stays sent, not mined.
        await fx.anvil.rpc("evm_setIntervalMining", [0]);
        let txId: string;
        try {
            txId = (await txmgr.create({ submitter: SUBMITTER, to: SINK, value: 9n, request_id: "actions-1" })).tx_id;
            await eventually("the intent is sent", 15_000, async () => ((await txmgr.get(txId)).state === "TRACKING" ? true : undefined));
            const sped = await txmgr.speedUp(txId, { reason: "sdk test" });
            assert.deepEqual([sped.tx_id, sped.action, sped.status], [txId, "speedup", "requested"]);
            const resent = await txmgr.rebroadcast(txId, { reason: "sdk test" });
            assert.deepEqual([resent.action, resent.status], ["rebroadcast", "requested"]);
            const cancel = await txmgr.cancel(txId, { reason: "sdk test" });
            assert.deepEqual([cancel.action, cancel.status], ["cancel", "requested"]);
            // A repeated cancel (a retry whose answer was lost) changes nothing.
            const again = await txmgr.cancel(txId);
            assert.deepEqual([again.action, again.status], ["cancel", "unchanged"]);
        } finally {
            await fx.anvil.rpc("evm_setIntervalMining", [1]);
        }
        const final = await txmgr.waitFinal(txId, 60_000, { pollInitialMs: 200, pollMaxMs: 500 });
        // The cancel (a 0-value self-transfer at the nonce) or the original, whichever was mined.
        assert.ok(final.state === "CANCELLED" || final.state === "CONFIRMED", final.state);
        assert.equal(await fx.anvil.nonce(SUBMITTER), Number(final.nonce) + 1);

        // Final: speed-up and re-broadcast are refused at once (409 invalid_state), never retried.
        for (const act of [() => txmgr.speedUp(txId), () => txmgr.rebroadcast(txId)]) {
            const before = log.length;
            const error = await rejection(act());
            assert.ok(error instanceof TxmgrError, String(error));
            assert.deepEqual([error.status, error.code], [409, "invalid_state"]);
            assert.equal(log.length - before, 1);
        }
    })();
});
