/**
 * What the SDK throws. Every answer of the daemon with a status of 400 or
 * more becomes a {@link TxmgrError} carrying the machine `code` and the
 * `field` at fault; a request that got no answer at all becomes a
 * {@link TxmgrTransportError}; a wait that ran out of time a
 * {@link WaitTimeoutError}.
 *
 * @packageDocumentation
 */

import { parseRetryAfter } from "./retry.js";
import type { CompletionRow, ErrorCode, ErrorDetail, ErrorIssue, TxView } from "./types.js";

/**
 * The `code` the SDK gives an error answer that is not in the daemon's error
 * shape (a proxy's HTML 502, a truncated body): the daemon itself answers
 * every error as `{"error":{"code",...}}`.
 */
export const UNEXPECTED_RESPONSE = "unexpected_response";

/**
 * An error answer of the daemon (status ≥ 400), after any retries.
 *
 * Branch on {@link TxmgrError.code}, never on the message (which is for
 * humans and may change between versions).
 */
export class TxmgrError extends Error {
    /** The HTTP status. */
    readonly status: number;
    /**
     * The daemon's machine code (`invalid_request`, `idempotency_conflict`,
     * `overloaded`, …), or {@link UNEXPECTED_RESPONSE}. Typed as the
     * document's closed set, open to codes a newer daemon may add.
     */
    readonly code: ErrorCode | typeof UNEXPECTED_RESPONSE | (string & {});
    /** The body field, query parameter or path segment at fault, when the daemon names one. */
    readonly field: string | undefined;
    /** Seconds the daemon asked the client to wait (`Retry-After`), on 429 and 503 `busy`. */
    readonly retryAfter: number | undefined;
    /** The policy rule that refused a create (`policy_violation` only). */
    readonly rule: string | undefined;
    /** The node holding the lease (`not_leader`, ops routes only). */
    readonly owner: string | undefined;
    /** Every problem of a rejected configuration (`invalid_config`, ops routes only). */
    readonly issues: readonly ErrorIssue[] | undefined;
    /**
     * The intent that already holds the `request_id` (`idempotency_conflict`
     * only): read it with `get` to see what was stored.
     */
    readonly txId: string | undefined;
    /**
     * The `request_id` a create was sent with (generated when the caller gave
     * none): keep it to retry the same create later, or to find the intent
     * with `getByRequestId`. Undefined for other calls.
     */
    readonly requestId: string | undefined;

    /** Builds the error of one answer; {@link TxmgrError.fromAnswer} reads it from a response. */
    constructor(init: {
        status: number;
        code: string;
        message: string;
        field?: string | null | undefined;
        retryAfter?: number | undefined;
        rule?: string | null | undefined;
        owner?: string | null | undefined;
        issues?: readonly ErrorIssue[] | null | undefined;
        txId?: string | null | undefined;
        requestId?: string | undefined;
    }) {
        super(init.message);
        this.name = "TxmgrError";
        this.status = init.status;
        this.code = init.code;
        this.field = init.field ?? undefined;
        this.retryAfter = init.retryAfter;
        this.rule = init.rule ?? undefined;
        this.owner = init.owner ?? undefined;
        this.issues = init.issues ?? undefined;
        this.txId = init.txId ?? undefined;
        this.requestId = init.requestId;
    }

    /**
     * Whether the daemon said the request may succeed later: 429
     * (`overloaded`, `rate_limited`) and every 5xx. A 4xx other than 429 is
     * never worth retrying unchanged.
     */
    get retryable(): boolean {
        return this.status === 429 || this.status >= 500;
    }

    /**
     * The error of an answer whose status is ≥ 400, from its status, its
     * `Retry-After` header and its body text (in the daemon's error shape, or
     * not: then the code is {@link UNEXPECTED_RESPONSE}).
     */
    static fromAnswer(status: number, headers: Headers, text: string, requestId?: string): TxmgrError {
        const retryAfter = parseRetryAfter(headers.get("retry-after"));
        const detail = errorDetailOf(text);
        if (detail === undefined) {
            const excerpt = text.length > 200 ? `${text.slice(0, 200)}…` : text;
            return new TxmgrError({
                status,
                code: UNEXPECTED_RESPONSE,
                message: `HTTP ${status} without the daemon's error body${excerpt ? `: ${excerpt}` : ""}`,
                retryAfter,
                requestId,
            });
        }
        return new TxmgrError({
            status,
            code: detail.code,
            message: detail.message,
            field: detail.field,
            retryAfter,
            rule: detail.rule,
            owner: detail.owner,
            issues: detail.issues,
            txId: detail.tx_id,
            requestId,
        });
    }
}

/** The `error` object of an error body, if `text` is one. */
function errorDetailOf(text: string): ErrorDetail | undefined {
    let parsed: unknown;
    try {
        parsed = JSON.parse(text);
    } catch {
        return undefined;
    }
    if (typeof parsed !== "object" || parsed === null || !("error" in parsed)) return undefined;
    const error: unknown = parsed.error;
    if (typeof error !== "object" || error === null) return undefined;
    const { code, message } = error as Record<string, unknown>;
    if (typeof code !== "string" || typeof message !== "string") return undefined;
    return error as ErrorDetail;
}

/**
 * No answer: the connection failed or the answer did not arrive within the
 * attempt's timeout, after any retries. Whether the daemon acted is unknown;
 * a create may be repeated with the same `requestId` (what the SDK's own
 * retries do).
 */
export class TxmgrTransportError extends Error {
    /** True when the attempt was abandoned at its timeout rather than failed by the network. */
    readonly timedOut: boolean;
    /** The `request_id` a create was sent with, as on {@link TxmgrError.requestId}. */
    readonly requestId: string | undefined;

    /** `cause` is the error `fetch` threw, when there was one. */
    constructor(message: string, init: { cause?: unknown; timedOut: boolean; requestId?: string | undefined }) {
        super(message, { cause: init.cause });
        this.name = "TxmgrTransportError";
        this.timedOut = init.timedOut;
        this.requestId = init.requestId;
    }

    /** Always true: nothing says the daemon refused the request. */
    get retryable(): boolean {
        return true;
    }
}

/**
 * `waitFinal` ran out of time before every transaction was final. Carries
 * what it learnt, so the caller can go on waiting from there.
 */
export class WaitTimeoutError extends Error {
    /** The ids not final yet. */
    readonly pending: readonly string[];
    /** The final feed rows found so far, by `tx_id` (waits on several ids). */
    readonly done: ReadonlyMap<string, CompletionRow>;
    /** The last view read (wait on one id), if any. */
    readonly last: TxView | undefined;
    /** The feed cursor reached (waits on several ids): pass it as `after` to go on without reading the feed again. */
    readonly after: string | undefined;

    /** `cause` is the last retryable error met while waiting, if any. */
    constructor(
        message: string,
        init: {
            pending: readonly string[];
            done?: ReadonlyMap<string, CompletionRow>;
            last?: TxView | undefined;
            after?: string | undefined;
            cause?: unknown;
        },
    ) {
        super(message, init.cause === undefined ? undefined : { cause: init.cause });
        this.name = "WaitTimeoutError";
        this.pending = init.pending;
        this.done = init.done ?? new Map();
        this.last = init.last;
        this.after = init.after;
    }
}

/**
 * Whether an error a call rejected with says "try again later": no answer
 * ({@link TxmgrTransportError}), or a {@link TxmgrError} with status 429 or
 * 5xx. An abort reason, a 4xx or a bug is not.
 */
export function isRetryableError(error: unknown): error is TxmgrError | TxmgrTransportError {
    return error instanceof TxmgrTransportError || (error instanceof TxmgrError && error.retryable);
}
