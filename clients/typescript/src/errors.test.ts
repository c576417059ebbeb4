/**
 * How an error answer becomes a `TxmgrError` (the daemon's real answers are
 * in test/client.test.ts; these are the shapes, including the ones no
 * daemon sends: a proxy's page, an empty body).
 */

import assert from "node:assert/strict";
import { test } from "node:test";

import { TxmgrError, TxmgrTransportError, UNEXPECTED_RESPONSE, isRetryableError } from "./errors.js";

const headers = (init: Record<string, string> = {}): Headers => new Headers(init);

test("the daemon's error body gives code, field, txId, rule and Retry-After", () => {
    const conflict = TxmgrError.fromAnswer(
        409,
        headers(),
        '{"error":{"code":"idempotency_conflict","message":"request_id already used","field":"request_id","tx_id":"01a24e5f-0a72-7239-8bab-50d50998fbc5"}}',
        "order-1",
    );
    assert.deepEqual(
        [conflict.status, conflict.code, conflict.field, conflict.txId, conflict.requestId, conflict.message],
        [409, "idempotency_conflict", "request_id", "01a24e5f-0a72-7239-8bab-50d50998fbc5", "order-1", "request_id already used"],
    );
    assert.equal(conflict.retryable, false);

    const limited = TxmgrError.fromAnswer(429, headers({ "retry-after": "3" }), '{"error":{"code":"rate_limited","message":"over"}}');
    assert.deepEqual([limited.code, limited.retryAfter, limited.field, limited.retryable], ["rate_limited", 3, undefined, true]);

    const policy = TxmgrError.fromAnswer(403, headers(), '{"error":{"code":"policy_violation","message":"no","field":"to","rule":"allowed_to"}}');
    assert.deepEqual([policy.code, policy.field, policy.rule], ["policy_violation", "to", "allowed_to"]);
});

test("an answer not in the daemon's shape is unexpected_response, with its status", () => {
    for (const body of ["<html>bad gateway</html>", "", '{"error":"x"}', '{"message":"x"}', "[]"]) {
        const error = TxmgrError.fromAnswer(502, headers(), body);
        assert.equal(error.code, UNEXPECTED_RESPONSE, body);
        assert.equal(error.status, 502);
        assert.equal(error.retryable, true);
    }
    assert.equal(TxmgrError.fromAnswer(404, headers(), "not found").retryable, false);
});

test("what is worth retrying", () => {
    assert.equal(isRetryableError(new TxmgrTransportError("reset", { timedOut: false })), true);
    assert.equal(isRetryableError(TxmgrError.fromAnswer(503, headers(), '{"error":{"code":"busy","message":"b"}}')), true);
    assert.equal(isRetryableError(TxmgrError.fromAnswer(400, headers(), '{"error":{"code":"invalid_request","message":"b"}}')), false);
    assert.equal(isRetryableError(new Error("bug")), false);
});
