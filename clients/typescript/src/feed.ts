/**
 * Reading the completion feed (README "Completion feed"): a follower that
 * yields page after page with the cursor to store, and the wait for many
 * transactions that reads the feed instead of polling each one.
 *
 * ```text
 * after ─► GET /v1/completions?after=…&wait=30s ─► rows? ─► yield {items, after: next_after}
 *   ▲                                               │        caller stores items + after together
 *   └──────────── next_after ◄──────────────────────┘ none: ask again (the daemon long-polls)
 * ```
 *
 * The cursor moves past rows the caller may not see (another submitter's,
 * another chain's when filtered) too; a page with no items but a new cursor
 * is yielded so that the cursor can be stored.
 *
 * `after: "end"` (the daemon's `after=end`) starts after the feed's current
 * end; the first answer replaces it by the position it stands for (the
 * beginning while the feed is empty), so that a row completing between two
 * requests is not skipped by asking for "the end" again.
 *
 * @packageDocumentation
 */

import type { CallOptions, WaitOptions } from "./client.js";
import { TxmgrError, WaitTimeoutError, isRetryableError } from "./errors.js";
import { backoffDelay, sleep } from "./retry.js";
import { isFinal, type CompletionRow, type FeedPage } from "./types.js";

/** Which rows of the feed a request reads. */
export interface FeedQuery {
    /**
     * The `next_after` (or a row's `cursor`) to continue after; absent or
     * `null` = from the beginning; `"end"` = after the feed's current end
     * (the answer's `next_after` is that position; null while the feed is
     * empty).
     */
    after?: string | null | undefined;
    /** Page size, 1 to 1000 (default 100). A page may hold fewer while more rows are ready. */
    limit?: number | undefined;
    /** Long poll: how long (s, at most 60) the daemon may hold the request while nothing is new. */
    waitSeconds?: number | undefined;
    /** Only these chains' rows (the cursor still moves past the others). */
    chainIds?: readonly number[] | undefined;
    /** Also the funds events `LOW_BALANCE` and `BALANCE_RESTORED` (no `tx_id`). */
    funds?: boolean | undefined;
}

/** What the feed readers need of a client: one page of the feed. */
export interface FeedSource {
    /** `GET /v1/completions` with these parameters. */
    completions(query: FeedQuery, call?: CallOptions): Promise<FeedPage>;
}

/** Options of {@link followFeed}. */
export interface FollowOptions {
    /**
     * The cursor stored with the last page handled (or what
     * `TxmgrClient.feedEnd()` answered); absent or `null` = from the feed's
     * beginning; `"end"` = only what completes from now on (the first batch
     * carries the cursor to store).
     */
    after?: string | null | undefined;
    /** Rows per page, 1 to 1000 (default 100). */
    limit?: number | undefined;
    /** Long poll per request (s), 1 to 60 (default 30); the daemon caps it at 90 % of its request timeout. */
    waitSeconds?: number | undefined;
    /** Only these chains' rows. */
    chainIds?: readonly number[] | undefined;
    /** Also the funds events. */
    funds?: boolean | undefined;
    /** Ends the iteration (quietly) when aborted, also during a long poll or a backoff. */
    signal?: AbortSignal | undefined;
    /** The longest pause (ms) between two attempts after failures (default 30 000). */
    maxBackoffMs?: number | undefined;
}

/** One page of the feed, as the follower yields it. */
export interface FeedBatch {
    /** The rows, in feed order (possibly none, when only the cursor moved). */
    items: CompletionRow[];
    /**
     * The cursor after this page. Store it in the same transaction as what
     * you make of `items`; pass it as `after` to resume after exactly these
     * rows — no gap, no repeat.
     */
    after: string;
}

/** The `after` value that starts after the feed's current end. */
const FEED_END = "end";

/**
 * Where to read next when an answer moved no cursor: `after` itself, except
 * that `"end"` of an empty feed is its beginning (asking for "the end" again
 * could pass over a row that completed in between).
 */
function fromHere(after: string | undefined): string | undefined {
    return after === FEED_END ? undefined : after;
}

/**
 * Follows the feed for as long as the caller iterates. Pages are fetched
 * one at a time, only when the caller asks for the next one, so a caller
 * that stores each batch's `after` before continuing never loses a row.
 *
 * Failures that say "try again" (no answer, 429, 5xx, 503 `busy` of a node
 * at its long-poll limit) are retried for ever with backoff, honouring
 * `Retry-After`; any other error (401, 400 for a malformed cursor, …) ends
 * the iteration by throwing it. Aborting `signal` ends it quietly. The
 * daemon checks a cursor's form only: one it never handed out (another
 * deployment's, a typo'd number) reads from that position on, silently.
 */
export async function* followFeed(
    source: FeedSource,
    options: FollowOptions = {},
): AsyncGenerator<FeedBatch, void, undefined> {
    const { signal } = options;
    const waitSeconds = Math.min(Math.max(options.waitSeconds ?? 30, 1), 60);
    const pacing = { initialDelayMs: 250, maxDelayMs: options.maxBackoffMs ?? 30_000 };
    let after = options.after ?? undefined;
    let failures = 0;
    while (signal?.aborted !== true) {
        let page: FeedPage;
        try {
            page = await source.completions(
                { after, limit: options.limit, waitSeconds, chainIds: options.chainIds, funds: options.funds },
                { signal, retry: { maxAttempts: 1 } },
            );
            failures = 0;
        } catch (error) {
            if (signal?.aborted) return;
            if (!isRetryableError(error)) throw error;
            failures += 1;
            const retryAfter = error instanceof TxmgrError ? error.retryAfter : undefined;
            try {
                await sleep(backoffDelay(failures, pacing, retryAfter), signal);
            } catch {
                return;
            }
            continue;
        }
        const next = page.next_after ?? page.items.at(-1)?.cursor ?? fromHere(after);
        if (next === undefined) {
            after = undefined; // an empty feed: its end is its beginning
            continue;
        }
        if (page.items.length === 0 && next === after) continue;
        after = next;
        yield { items: page.items, after: next };
    }
}

/**
 * Waits for several transactions to be final by reading the feed from
 * `options.after` (see `TxmgrClient.waitFinal`: e.g. `TxmgrClient.feedEnd()`
 * taken before the creates). Resolves with each id's
 * final row (keyed by the id as given); ids are matched without regard to
 * case. A `REORGED_OUT` row for an id found final puts it back to waiting.
 */
export async function waitFinalByFeed(
    source: FeedSource,
    txIds: readonly string[],
    timeoutMs: number,
    options: WaitOptions = {},
): Promise<Map<string, CompletionRow>> {
    const { signal } = options;
    const wanted = new Map(txIds.map((id) => [id.toLowerCase(), id] as const));
    const done = new Map<string, CompletionRow>();
    const deadline = Date.now() + timeoutMs;
    const pacing = { initialDelayMs: options.pollInitialMs ?? 500, maxDelayMs: options.pollMaxMs ?? 5_000 };
    let after = options.after ?? undefined;
    let failures = 0;
    let lastError: unknown;
    while (done.size < wanted.size) {
        const remaining = deadline - Date.now();
        if (remaining <= 0) {
            const pending = [...wanted.values()].filter((id) => !done.has(id));
            throw new WaitTimeoutError(`${pending.length} of ${wanted.size} transactions not final after ${timeoutMs} ms`, {
                pending,
                done,
                after,
                cause: lastError,
            });
        }
        try {
            const page = await source.completions(
                { after, limit: 1000, waitSeconds: Math.min(30, remaining / 1000), chainIds: options.chainIds },
                { signal, retry: { maxAttempts: 1 } },
            );
            failures = 0;
            lastError = undefined;
            for (const row of page.items) {
                const id = row.tx_id == null ? undefined : wanted.get(row.tx_id.toLowerCase());
                if (id === undefined) continue;
                if (isFinal(row.state)) done.set(id, row);
                else if (row.state === "REORGED_OUT") done.delete(id);
            }
            after = page.next_after ?? page.items.at(-1)?.cursor ?? fromHere(after);
        } catch (error) {
            if (signal?.aborted || !isRetryableError(error)) throw error;
            lastError = error;
            failures += 1;
            const retryAfter = error instanceof TxmgrError ? error.retryAfter : undefined;
            await sleep(Math.min(backoffDelay(failures, pacing, retryAfter), Math.max(0, deadline - Date.now())), signal);
        }
    }
    return done;
}
