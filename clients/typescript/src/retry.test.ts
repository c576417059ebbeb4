/**
 * The retry decisions, which are pure functions. How the client applies them
 * to a real daemon (restarts, 429s) is tested in test/crash.test.ts and
 * test/client.test.ts.
 */

import assert from "node:assert/strict";
import { test } from "node:test";

import { backoffDelay, isRetryable, parseRetryAfter, sleep } from "./retry.js";

const policy = { initialDelayMs: 100, maxDelayMs: 1_000 };

test("backoff doubles, is capped, and never drops below half its step", () => {
    assert.equal(backoffDelay(1, policy, undefined, () => 0), 50);
    assert.equal(backoffDelay(1, policy, undefined, () => 1), 100);
    assert.equal(backoffDelay(3, policy, undefined, () => 1), 400);
    assert.equal(backoffDelay(10, policy, undefined, () => 1), 1_000);
    assert.equal(backoffDelay(10_000, policy, undefined, () => 0), 500, "no overflow");
});

test("Retry-After is a floor, with at most 20 % (1 s) added", () => {
    assert.equal(backoffDelay(1, policy, 3, () => 0), 3_000);
    assert.equal(backoffDelay(1, policy, 3, () => 1), 3_600);
    assert.equal(backoffDelay(1, policy, 30, () => 1), 31_000);
});

test("only 429, 5xx and lost answers are retried; unsafe actions only after busy", () => {
    const answer = (status: number, code: string) => ({ kind: "answer", status, code }) as const;
    assert.equal(isRetryable("idempotent", answer(503, "unavailable")), true);
    assert.equal(isRetryable("idempotent", answer(500, "internal")), true);
    assert.equal(isRetryable("idempotent", answer(429, "overloaded")), true);
    assert.equal(isRetryable("idempotent", { kind: "transport" }), true);
    for (const status of [400, 401, 403, 404, 409, 413, 415, 421, 422, 423]) {
        assert.equal(isRetryable("idempotent", answer(status, "x")), false, String(status));
    }
    assert.equal(isRetryable("unsafe", answer(503, "busy")), true);
    assert.equal(isRetryable("unsafe", answer(503, "unavailable")), false);
    assert.equal(isRetryable("unsafe", answer(429, "rate_limited")), false);
    assert.equal(isRetryable("unsafe", { kind: "transport" }), false);
});

test("Retry-After is read as seconds or as an HTTP date", () => {
    assert.equal(parseRetryAfter("3"), 3);
    assert.equal(parseRetryAfter(null), undefined);
    assert.equal(parseRetryAfter("soon"), undefined);
    const now = Date.parse("2026-01-01T00:00:00Z");
    assert.equal(parseRetryAfter("Thu, 01 Jan 2026 00:00:10 GMT", now), 10);
});

test("sleep rejects with the abort reason", async () => {
    const controller = new AbortController();
    const pending = sleep(10_000, controller.signal);
    controller.abort(new Error("stop"));
    await assert.rejects(pending, /stop/);
});
