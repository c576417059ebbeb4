/**
 * When to retry a request and how long to wait first: exponential backoff
 * with jitter, capped, never earlier than the daemon's `Retry-After`.
 *
 * ```text
 * answer ─► 2xx/3xx ─► done
 *        ├► 4xx but 429 ─► thrown at once (retrying cannot change it)
 *        ├► 429, 5xx, no answer ─► mode allows it? ─► attempts left? ─► Retry-After within the cap?
 *        │                                         └─ any "no" ─► thrown
 *        └► wait backoffDelay(retry, policy, Retry-After), then the same request again
 * ```
 *
 * The decisions are pure functions so they can be tested without a daemon;
 * the client wraps them around `fetch`.
 *
 * @packageDocumentation
 */

/** How a call retries. Every field has a default ({@link DEFAULT_RETRY_POLICY}). */
export interface RetryPolicy {
    /** Attempts in all, the first included; 1 = never retry. */
    maxAttempts: number;
    /** The first retry waits about this long (ms); each further retry doubles it. */
    initialDelayMs: number;
    /** No backoff step waits longer than this (ms), `Retry-After` aside. */
    maxDelayMs: number;
    /**
     * The longest `Retry-After` (ms) the SDK waits out by itself. A longer one
     * ends the retries at once and the error (with `retryAfter`) goes to the
     * caller, who decides: the SDK never retries earlier than the daemon asked.
     */
    maxRetryAfterMs: number;
}

/** About 30 s of retries in all: 8 attempts, 250 ms doubling to 8 s, `Retry-After` up to 60 s. */
export const DEFAULT_RETRY_POLICY: Readonly<RetryPolicy> = Object.freeze({
    maxAttempts: 8,
    initialDelayMs: 250,
    maxDelayMs: 8_000,
    maxRetryAfterMs: 60_000,
});

/**
 * Which failures a call may repeat.
 *
 * - `idempotent`: reads, creates (the same `request_id` on every attempt: the
 *   daemon answers a repeat with the stored intent) and cancels (a repeated
 *   cancel answers `unchanged`). Retried after 429, every 5xx and no answer.
 * - `unsafe`: speed-up, re-broadcast, requeue. A repeat after an ambiguous
 *   failure (no answer, a timeout's 503 `unavailable`, a 500) could act twice
 *   (a second fee bump), so only the answer that says nothing was done is
 *   retried: 503 `busy`.
 */
export type RetryMode = "idempotent" | "unsafe";

/** What one attempt ended with, as far as the retry decision is concerned. */
export type AttemptFailure =
    | { kind: "answer"; status: number; code: string }
    | { kind: "transport" };

/** Whether `failure` may be retried in `mode` (attempt counts and `Retry-After` caps aside). */
export function isRetryable(mode: RetryMode, failure: AttemptFailure): boolean {
    if (failure.kind === "transport") return mode === "idempotent";
    if (mode === "unsafe") return failure.status === 503 && failure.code === "busy";
    return failure.status === 429 || failure.status >= 500;
}

/**
 * How long to wait (ms) before retry number `retry` (1 for the first retry).
 *
 * Without `Retry-After`: "equal jitter" — half the exponential step plus a
 * random part of the other half, so clients that failed together spread out
 * and no wait is ever near zero. With it: never earlier than it says, and up
 * to 20 % (at most 1 s) later, so clients told the same second do not all
 * come back in the same instant.
 */
export function backoffDelay(
    retry: number,
    policy: Pick<RetryPolicy, "initialDelayMs" | "maxDelayMs">,
    retryAfterSeconds?: number,
    random: () => number = Math.random,
): number {
    const step = Math.min(policy.maxDelayMs, policy.initialDelayMs * 2 ** Math.max(0, retry - 1));
    const jittered = step / 2 + (random() * step) / 2;
    if (retryAfterSeconds === undefined) return Math.round(jittered);
    const floor = retryAfterSeconds * 1000;
    return Math.round(floor + random() * Math.min(floor * 0.2, 1000));
}

/**
 * The seconds of a `Retry-After` header: the daemon sends whole seconds
 * (never 0); an HTTP date (from a proxy) is read too. Undefined when absent
 * or unreadable.
 */
export function parseRetryAfter(value: string | null | undefined, nowMs: number = Date.now()): number | undefined {
    if (value === null || value === undefined) return undefined;
    const trimmed = value.trim();
    if (/^[0-9]+$/.test(trimmed)) return Number(trimmed);
    const date = Date.parse(trimmed);
    if (Number.isNaN(date)) return undefined;
    return Math.max(0, Math.ceil((date - nowMs) / 1000));
}

/**
 * Resolves after `ms`, or rejects with the signal's reason as soon as
 * `signal` aborts.
 */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve, reject) => {
        if (signal?.aborted) {
            reject(signal.reason);
            return;
        }
        const onAbort = (): void => {
            clearTimeout(timer);
            reject(signal?.reason);
        };
        const timer = setTimeout(() => {
            signal?.removeEventListener("abort", onAbort);
            resolve();
        }, Math.max(0, ms));
        signal?.addEventListener("abort", onAbort, { once: true });
    });
}
