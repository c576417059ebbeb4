/**
 * The HTTP client of the txmgr daemon's client API (README "HTTP API").
 *
 * ```text
 * call ─► request(): URL, bearer token, JSON body (a create's request_id fixed once)
 *          └► attempt: fetch with a per-attempt timeout and the caller's signal
 *               ├─ 2xx ─► parsed body
 *               └─ error answer / no answer ─► isRetryable? ─► backoffDelay ─► attempt again
 *                                               └─ no ─► TxmgrError / TxmgrTransportError
 * ```
 *
 * @packageDocumentation
 */

import { randomUUID } from "node:crypto";

import {
    TxmgrError,
    TxmgrTransportError,
    UNEXPECTED_RESPONSE,
    WaitTimeoutError,
    isRetryableError,
} from "./errors.js";
import { followFeed, waitFinalByFeed, type FeedBatch, type FeedQuery, type FollowOptions } from "./feed.js";
import {
    DEFAULT_RETRY_POLICY,
    backoffDelay,
    isRetryable,
    sleep,
    type AttemptFailure,
    type RetryMode,
    type RetryPolicy,
} from "./retry.js";
import {
    isFinal,
    type ActionAccepted,
    type CompletionRow,
    type CreateBody,
    type Created,
    type FeedPage,
    type Page,
    type TxState,
    type TxView,
    type WeiString,
} from "./types.js";

/** The SDK's version, sent in `User-Agent`. */
export const VERSION = "0.1.0";

/** How to reach and authenticate to a daemon. */
export interface TxmgrClientOptions {
    /**
     * The daemon's base URL, e.g. `https://txmgr.internal:8443` (a path
     * prefix, for a daemon behind a proxy, is kept).
     */
    baseUrl: string;
    /** The bearer token (`[[auth.tokens]]`); omit for a tokenless node on loopback. */
    token?: string | undefined;
    /**
     * The `fetch` to use; default the global one. Pass another for a private
     * CA without `NODE_EXTRA_CA_CERTS`, a proxy, or instrumentation.
     */
    fetch?: typeof fetch | undefined;
    /**
     * Node only: an undici `Dispatcher` (e.g. `new Agent({ connect: { ca } })`)
     * passed as `dispatcher` on every request of the global `fetch`, to trust a
     * private CA or tune connections. Typed loosely so the SDK needs no undici.
     */
    dispatcher?: unknown;
    /** Default retry policy of every call (merged over {@link DEFAULT_RETRY_POLICY}). */
    retry?: Partial<RetryPolicy> | undefined;
    /**
     * The longest one attempt may take (ms), answer body included; default
     * 30 000. Feed long polls get their `wait` on top.
     */
    requestTimeoutMs?: number | undefined;
    /** Extra headers on every request (they may replace the SDK's `user-agent`, not its token or content type). */
    headers?: Readonly<Record<string, string>> | undefined;
}

/** Options every call takes. */
export interface CallOptions {
    /** Aborts the call, its retries and waits included; the call rejects with the signal's reason. */
    signal?: AbortSignal | undefined;
    /** This call's retry policy, merged over the client's. `{ maxAttempts: 1 }` = no retry. */
    retry?: Partial<RetryPolicy> | undefined;
    /** This call's per-attempt timeout (ms), instead of the client's `requestTimeoutMs`. */
    timeoutMs?: number | undefined;
}

/** An amount of wei: a string (decimal or `0x` hex) or a `bigint`. Never a `number`: the daemon refuses JSON numbers, which lose precision. */
export type Wei = WeiString | bigint;

/**
 * What {@link TxmgrClient.create} takes: the create body, with amounts also
 * as `bigint` and `valid_until` also as a `Date`. `request_id` is optional:
 * one is generated when absent.
 */
export type CreateInput = Omit<CreateBody, "value" | "max_fee_per_gas" | "max_priority_fee_per_gas" | "valid_until"> & {
    /** Wei to send; absent = 0. */
    value?: Wei | null | undefined;
    /** EIP-1559 max fee per gas in wei; absent = market price within the submitter's caps. */
    max_fee_per_gas?: Wei | null | undefined;
    /** EIP-1559 max priority fee per gas in wei; at most `max_fee_per_gas`. */
    max_priority_fee_per_gas?: Wei | null | undefined;
    /** Deadline (RFC 3339 string or `Date`): after it an intent without a nonce is REJECTED, one sent but not mined cancelled. */
    valid_until?: string | Date | null | undefined;
};

/** The answer to a create, and whether it was a replay. */
export type CreateResult = Omit<Created, "request_id"> & {
    /** The `request_id` the intent is stored under: the caller's, or the one the SDK generated. */
    request_id: string;
    /**
     * True when the daemon answered 200: the `request_id` was already stored
     * with the same body — by an earlier call, or by an earlier attempt of
     * this one whose answer was lost. Either way the intent exists once.
     */
    replayed: boolean;
};

/** Which of a submitter's transactions `list` reads. */
export interface ListQuery {
    /** The submitter's address (required by the daemon). */
    submitter: string;
    /** Only these chains; default every chain the token may use the submitter on. */
    chainIds?: readonly number[] | undefined;
    /** Only transactions in this state. */
    state?: TxState | undefined;
    /** Page size, 1 to 500 (default 50). A page may hold fewer while `next` is set. */
    limit?: number | undefined;
    /** The `next` of the previous page. */
    after?: string | undefined;
}

/** Options of the actions (cancel, speed-up, re-broadcast, requeue). */
export interface ActionOptions extends CallOptions {
    /** Why, up to 500 characters; kept in the daemon's audit log. */
    reason?: string | undefined;
}

/** Options of {@link TxmgrClient.waitFinal}. */
export interface WaitOptions {
    /** Aborts the wait; it rejects with the signal's reason. */
    signal?: AbortSignal | undefined;
    /** One id: the first pause between two GETs (ms, default 500); it doubles, with jitter. */
    pollInitialMs?: number | undefined;
    /** One id: the longest pause between two GETs (ms, default 5 000). */
    pollMaxMs?: number | undefined;
    /**
     * Several ids: the feed cursor to read from — one taken before the
     * intents could complete ({@link TxmgrClient.feedEnd} or your feed
     * follower's stored cursor, read before the creates). Default: the
     * feed's beginning (also for `null`, what `feedEnd` answers for an
     * empty feed), which reads every row the daemon keeps (`feed.retain`,
     * 30 days by default) once.
     */
    after?: string | null | undefined;
    /** Several ids: only these chains' feed rows (less to read; the cursor covers every chain). */
    chainIds?: readonly number[] | undefined;
}

/** One attempt's answer. */
interface Answer {
    status: number;
    headers: Headers;
    text: string;
}

/** How `request` sends one call. */
interface RequestPlan {
    query?: URLSearchParams | undefined;
    body?: unknown;
    mode: RetryMode;
    requestId?: string | undefined;
    call?: CallOptions | undefined;
}

/**
 * A client of one daemon (or of a load balancer in front of several: any
 * node answers every client route). Safe to share; holds no connection state
 * of its own beyond what `fetch` pools.
 *
 * @example
 * ```ts
 * const txmgr = new TxmgrClient({ baseUrl: "https://txmgr.internal:8443", token: process.env.TXMGR_TOKEN });
 * const { tx_id } = await txmgr.create({ submitter, to, value: 10n ** 15n, request_id: `order-${order.id}` });
 * const tx = await txmgr.waitFinal(tx_id, 5 * 60_000);
 * ```
 */
export class TxmgrClient {
    readonly #base: string;
    readonly #token: string | undefined;
    readonly #fetch: typeof fetch;
    readonly #dispatcher: unknown;
    readonly #retry: RetryPolicy;
    readonly #timeoutMs: number;
    readonly #headers: Readonly<Record<string, string>>;

    /** Checks `baseUrl` (a `TypeError` if it is not an absolute URL); sends nothing. */
    constructor(options: TxmgrClientOptions) {
        const url = new URL(options.baseUrl);
        this.#base = url.href.replace(/\/+$/, "");
        this.#token = options.token;
        this.#fetch = options.fetch ?? globalThis.fetch;
        this.#dispatcher = options.dispatcher;
        this.#retry = withPolicy(DEFAULT_RETRY_POLICY, options.retry);
        this.#timeoutMs = options.requestTimeoutMs ?? 30_000;
        this.#headers = options.headers ?? {};
    }

    /**
     * Creates an intent (`POST /v1/transactions`). A `request_id` is always
     * sent — the caller's, else a fresh UUID — and every retry sends the same
     * one, so the intent is stored once however many attempts it takes.
     * Retried: no answer, 429 (`overloaded`, `rate_limited`, after
     * `Retry-After`), 5xx (503 `busy` after `Retry-After`). Never retried: any
     * other 4xx, e.g. 409 `idempotency_conflict` (the same `request_id` with
     * a different body). Errors carry `requestId` so the caller can repeat the
     * create later.
     *
     * The key holds while the intent is stored (`history.retain`, 30 days by
     * default): a repeat after that creates a new intent.
     */
    async create(input: CreateInput, call?: CallOptions): Promise<CreateResult> {
        const requestId = input.request_id ?? randomUUID();
        const body: CreateBody = {
            ...input,
            request_id: requestId,
            value: wei(input.value),
            max_fee_per_gas: wei(input.max_fee_per_gas),
            max_priority_fee_per_gas: wei(input.max_priority_fee_per_gas),
            valid_until: input.valid_until instanceof Date ? input.valid_until.toISOString() : input.valid_until,
        };
        const answer = await this.#request<Created>("POST", "/v1/transactions", {
            body,
            mode: "idempotent",
            requestId,
            call,
        });
        return { ...answer.body, request_id: answer.body.request_id ?? requestId, replayed: answer.status === 200 };
    }

    /** One transaction by id (`GET /v1/transactions/{tx_id}`); 404 `not_found` or `aged_out` when absent. */
    async get(txId: string, call?: CallOptions): Promise<TxView> {
        const answer = await this.#request<TxView>("GET", `/v1/transactions/${encodeURIComponent(txId)}`, {
            mode: "idempotent",
            call,
        });
        return answer.body;
    }

    /**
     * The submitter's transaction with this `request_id`
     * (`GET /v1/transactions?submitter=…&request_id=…`); 404 `not_found` when
     * none. `chainId` is required when the daemon serves several chains.
     */
    async getByRequestId(
        submitter: string,
        requestId: string,
        options: CallOptions & { chainId?: number | undefined } = {},
    ): Promise<TxView> {
        const query = new URLSearchParams({ submitter, request_id: requestId });
        if (options.chainId !== undefined) query.set("chain_id", String(options.chainId));
        const answer = await this.#request<TxView>("GET", "/v1/transactions", {
            query,
            mode: "idempotent",
            call: options,
        });
        return answer.body;
    }

    /**
     * One page of a submitter's transactions, in acceptance order. A page may
     * hold fewer than `limit` items while `next` is set (pages are bounded in
     * bytes too): follow `next` until it is null, or use {@link listAll}.
     */
    async list(query: ListQuery, call?: CallOptions): Promise<Page> {
        const params = new URLSearchParams({ submitter: query.submitter });
        for (const chainId of query.chainIds ?? []) params.append("chain_id", String(chainId));
        if (query.state !== undefined) params.set("state", query.state);
        if (query.limit !== undefined) params.set("limit", String(query.limit));
        if (query.after !== undefined) params.set("after", query.after);
        const answer = await this.#request<Page>("GET", "/v1/transactions", { query: params, mode: "idempotent", call });
        return answer.body;
    }

    /** Every transaction `list` would page through, page by page, as one async iterable. */
    async *listAll(query: Omit<ListQuery, "after">, call?: CallOptions): AsyncGenerator<TxView, void, undefined> {
        let after: string | undefined;
        do {
            const page = await this.list({ ...query, after }, call);
            yield* page.items;
            after = page.next ?? undefined;
        } while (after !== undefined);
    }

    /**
     * Cancels (`POST …/cancel`): a QUEUED intent at once, a sent one by a
     * 0-value replacement at its nonce (it ends CANCELLED, or CONFIRMED if the
     * original wins). Retried like a read: a repeated cancel of an intent
     * being cancelled, or already CANCELLED (a retry whose first answer was
     * lost), answers 200 `status: "unchanged"` and never raises fees. 409
     * `invalid_state`: the intent is final otherwise, or already mined.
     */
    cancel(txId: string, options?: ActionOptions): Promise<ActionAccepted> {
        return this.#act("cancel", txId, "idempotent", options);
    }

    /**
     * Asks the leader to sign a fee bump now (`POST …/speedup`; TRACKING or
     * STUCK, not mined). Retried only after 503 `busy`: a repeat after a lost
     * answer could bump twice. A client token may ask once per
     * `resubmit_interval` (else 429 `rate_limited` with `retryAfter`).
     */
    speedUp(txId: string, options?: ActionOptions): Promise<ActionAccepted> {
        return this.#act("speedup", txId, "unsafe", options);
    }

    /** Asks the leader to re-send the newest attempt's bytes now (`POST …/rebroadcast`); retried as {@link speedUp}. */
    rebroadcast(txId: string, options?: ActionOptions): Promise<ActionAccepted> {
        return this.#act("rebroadcast", txId, "unsafe", options);
    }

    /**
     * Sends again, with a fresh nonce, an intent whose nonce a foreign
     * transaction took (`POST …/requeue`; STUCK, `nonce_consumed_externally`);
     * retried as {@link speedUp}.
     */
    requeue(txId: string, options?: ActionOptions): Promise<ActionAccepted> {
        return this.#act("requeue", txId, "unsafe", options);
    }

    /**
     * One page of the completion feed (`GET /v1/completions`). With
     * `waitSeconds`, the daemon holds the request until a row arrives or the
     * wait ends (at most 60 s and 90 % of its `http.request_timeout`).
     * Prefer {@link follow} to read the feed continuously.
     */
    async completions(query: FeedQuery = {}, call: CallOptions = {}): Promise<FeedPage> {
        const params = new URLSearchParams();
        for (const chainId of query.chainIds ?? []) params.append("chain_id", String(chainId));
        if (query.after != null) params.set("after", query.after);
        if (query.limit !== undefined) params.set("limit", String(query.limit));
        let waitMs = 0;
        if (query.waitSeconds !== undefined && query.waitSeconds > 0) {
            waitMs = Math.round(Math.min(query.waitSeconds, 60) * 1000);
            params.set("wait", `${waitMs}ms`);
        }
        if (query.funds !== undefined) params.set("funds", String(query.funds));
        const answer = await this.#request<FeedPage>("GET", "/v1/completions", {
            query: params,
            mode: "idempotent",
            call: { ...call, timeoutMs: call.timeoutMs ?? this.#timeoutMs + waitMs },
        });
        return answer.body;
    }

    /**
     * The feed's current end (`GET /v1/completions?after=end&limit=1`): the
     * cursor after the last row every reader can see now, or `null` while the
     * feed is empty (then reading from the beginning is the same). Take it
     * *before* creating the intents you will wait for with
     * `waitFinal(ids, ms, { after })`, or to follow only what completes from
     * now on. Retried like a read.
     *
     * @example
     * ```ts
     * const after = await txmgr.feedEnd(); // before the creates
     * const ids: string[] = [];
     * for (const body of bodies) ids.push((await txmgr.create(body)).tx_id);
     * const rows = await txmgr.waitFinal(ids, 5 * 60_000, { after });
     * ```
     */
    async feedEnd(call: CallOptions = {}): Promise<string | null> {
        const page = await this.completions({ after: "end", limit: 1 }, call);
        return page.next_after ?? null;
    }

    /**
     * Follows the completion feed from `options.after`, yielding each page
     * that moves the cursor, with the cursor to store *with the data you
     * derive from it* (same database transaction): resume from it and nothing
     * is skipped or repeated. See {@link followFeed}.
     */
    follow(options: FollowOptions = {}): AsyncGenerator<FeedBatch, void, undefined> {
        return followFeed(this, options);
    }

    /**
     * Waits until one transaction is final (CONFIRMED, FAILED_FINAL,
     * REJECTED, CANCELLED) by GETs with backoff, and returns its view.
     * Rejects with {@link WaitTimeoutError} (carrying the last view) after
     * `timeoutMs`, or with the first non-retryable error (e.g. 404).
     */
    waitFinal(txId: string, timeoutMs: number, options?: WaitOptions): Promise<TxView>;
    /**
     * Waits until several transactions are final by reading the completion
     * feed (one long-polling request at a time, not a GET per id), and
     * returns their final feed rows by id. Start from a cursor taken before
     * the intents could complete (`options.after`, e.g. {@link feedEnd}
     * called before the creates); without one the feed is read from its
     * beginning. A `REORGED_OUT` row seen for an id already
     * final puts it back to waiting. Rejects with {@link WaitTimeoutError}
     * (carrying the rows found and the cursor reached) after `timeoutMs`.
     */
    waitFinal(txIds: readonly string[], timeoutMs: number, options?: WaitOptions): Promise<Map<string, CompletionRow>>;
    waitFinal(
        ids: string | readonly string[],
        timeoutMs: number,
        options: WaitOptions = {},
    ): Promise<TxView | Map<string, CompletionRow>> {
        if (typeof ids === "string") return this.#waitOne(ids, timeoutMs, options);
        return waitFinalByFeed(this, ids, timeoutMs, options);
    }

    async #waitOne(txId: string, timeoutMs: number, options: WaitOptions): Promise<TxView> {
        const deadline = Date.now() + timeoutMs;
        const pacing = { initialDelayMs: options.pollInitialMs ?? 500, maxDelayMs: options.pollMaxMs ?? 5_000 };
        let last: TxView | undefined;
        let lastError: unknown;
        for (let poll = 1; ; poll++) {
            let pause = backoffDelay(poll, pacing);
            try {
                last = await this.get(txId, { signal: options.signal, retry: { maxAttempts: 1 } });
                lastError = undefined;
                if (isFinal(last.state)) return last;
            } catch (error) {
                if (options.signal?.aborted || !isRetryableError(error)) throw error;
                lastError = error;
                const retryAfter = error instanceof TxmgrError ? error.retryAfter : undefined;
                if (retryAfter !== undefined) pause = Math.max(pause, retryAfter * 1000);
            }
            const remaining = deadline - Date.now();
            if (remaining <= 0) {
                throw new WaitTimeoutError(`transaction ${txId} is not final after ${timeoutMs} ms`, {
                    pending: [txId],
                    last,
                    cause: lastError,
                });
            }
            await sleep(Math.min(pause, remaining), options.signal);
        }
    }

    #act(action: string, txId: string, mode: RetryMode, options: ActionOptions = {}): Promise<ActionAccepted> {
        const body = options.reason === undefined ? {} : { reason: options.reason };
        return this.#request<ActionAccepted>("POST", `/v1/transactions/${encodeURIComponent(txId)}/${action}`, {
            body,
            mode,
            call: options,
        }).then((answer) => answer.body);
    }

    /** Sends one call with its retries; resolves with the status and parsed body of a 2xx answer. */
    async #request<T>(method: "GET" | "POST", path: string, plan: RequestPlan): Promise<{ status: number; body: T }> {
        const policy = withPolicy(this.#retry, plan.call?.retry);
        const signal = plan.call?.signal;
        const timeoutMs = plan.call?.timeoutMs ?? this.#timeoutMs;
        const search = plan.query?.toString();
        const url = `${this.#base}${path}${search ? `?${search}` : ""}`;
        const payload = plan.body === undefined ? undefined : JSON.stringify(plan.body);
        for (let attempt = 1; ; attempt++) {
            signal?.throwIfAborted();
            let error: TxmgrError | TxmgrTransportError;
            let failure: AttemptFailure;
            try {
                const answer = await this.#attempt(method, url, payload, timeoutMs, signal, plan.requestId);
                if (answer.status >= 200 && answer.status < 300) {
                    return { status: answer.status, body: parseBody<T>(answer, plan.requestId) };
                }
                error = TxmgrError.fromAnswer(answer.status, answer.headers, answer.text, plan.requestId);
                failure = { kind: "answer", status: error.status, code: error.code };
            } catch (thrown) {
                if (!(thrown instanceof TxmgrTransportError)) throw thrown;
                error = thrown;
                failure = { kind: "transport" };
            }
            const retryAfter = error instanceof TxmgrError ? error.retryAfter : undefined;
            const giveUp =
                !isRetryable(plan.mode, failure) ||
                attempt >= policy.maxAttempts ||
                (retryAfter !== undefined && retryAfter * 1000 > policy.maxRetryAfterMs);
            if (giveUp) throw error;
            await sleep(backoffDelay(attempt, policy, retryAfter), signal);
        }
    }

    /**
     * One HTTP exchange, the answer body read in full, within `timeoutMs`.
     * Rejects with the caller's abort reason, or a {@link TxmgrTransportError}.
     */
    async #attempt(
        method: string,
        url: string,
        payload: string | undefined,
        timeoutMs: number,
        signal: AbortSignal | undefined,
        requestId: string | undefined,
    ): Promise<Answer> {
        const controller = new AbortController();
        let timedOut = false;
        const timer = setTimeout(() => {
            timedOut = true;
            controller.abort();
        }, timeoutMs);
        const onAbort = (): void => controller.abort(signal?.reason);
        signal?.addEventListener("abort", onAbort, { once: true });
        const headers: Record<string, string> = {
            accept: "application/json",
            "user-agent": `txmgr-client-ts/${VERSION}`,
            ...this.#headers,
        };
        if (this.#token !== undefined) headers["authorization"] = `Bearer ${this.#token}`;
        // Every POST needs it, even with an empty body (the daemon's CSRF guard).
        if (method === "POST") headers["content-type"] = "application/json";
        const init = {
            method,
            headers,
            body: payload,
            signal: controller.signal,
            // The API never redirects; following a redirect would turn a POST into a GET.
            redirect: "manual",
            ...(this.#dispatcher === undefined ? {} : { dispatcher: this.#dispatcher }),
        } as RequestInit;
        const fetchOnce = this.#fetch;
        try {
            const response = await fetchOnce(url, init);
            const text = await response.text();
            return { status: response.status, headers: response.headers, text };
        } catch (cause) {
            if (signal?.aborted) throw signal.reason;
            const message = timedOut
                ? `${method} ${url}: no answer within ${timeoutMs} ms`
                : `${method} ${url}: ${cause instanceof Error ? cause.message : String(cause)}`;
            throw new TxmgrTransportError(message, { cause, timedOut, requestId });
        } finally {
            clearTimeout(timer);
            signal?.removeEventListener("abort", onAbort);
        }
    }
}

/** `base` with the fields `override` sets (an `undefined` field keeps the base's, so no policy loses its bounds). */
function withPolicy(base: Readonly<RetryPolicy>, override: Partial<RetryPolicy> | undefined): RetryPolicy {
    return {
        maxAttempts: override?.maxAttempts ?? base.maxAttempts,
        initialDelayMs: override?.initialDelayMs ?? base.initialDelayMs,
        maxDelayMs: override?.maxDelayMs ?? base.maxDelayMs,
        maxRetryAfterMs: override?.maxRetryAfterMs ?? base.maxRetryAfterMs,
    };
}

/** A `bigint` amount as the decimal string the daemon reads; strings pass as they are. */
function wei(value: Wei | null | undefined): WeiString | null | undefined {
    return typeof value === "bigint" ? value.toString() : value;
}

/** The JSON of a 2xx answer; one that is not JSON is an error of its own. */
function parseBody<T>(answer: Answer, requestId: string | undefined): T {
    try {
        return JSON.parse(answer.text) as T;
    } catch {
        throw new TxmgrError({
            status: answer.status,
            code: UNEXPECTED_RESPONSE,
            message: `HTTP ${answer.status} with a body that is not JSON`,
            requestId,
        });
    }
}
