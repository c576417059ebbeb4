/**
 * The verifier against the daemon's own vectors (`actors/src/webhook/signature.rs`
 * tests): a pure function, so no daemon is needed here. Real deliveries are
 * checked against a running daemon in test/webhook.test.ts.
 */

import assert from "node:assert/strict";
import { test } from "node:test";

import { WebhookVerificationError, signWebhook, verifySignature, verifyWebhook } from "./webhook.js";

test("signs exactly as the daemon (independent HMAC-SHA256 vector)", () => {
    assert.equal(
        signWebhook("secret", 1_700_000_000, "{}"),
        "t=1700000000,v1=b8569b78799ff9e3cbff0fc2d63a33a2b57f3282abd07c37ae5e8e7d79a5f163",
    );
});

test("accepts its own signature within the tolerance only", () => {
    const header = signWebhook("k", 1000, "body");
    assert.equal(verifySignature("k", header, "body", { nowSeconds: 1100, toleranceSeconds: 300 }), true);
    assert.equal(verifySignature("k", header, "body", { nowSeconds: 1400, toleranceSeconds: 300 }), false, "too old");
    assert.equal(verifySignature("k", header, "body", { nowSeconds: 700, toleranceSeconds: 300 }), true, "300 s ahead");
    assert.equal(verifySignature("k", header, "body", { nowSeconds: 699, toleranceSeconds: 300 }), false, "too far ahead");
    assert.equal(verifySignature("k", header, "other", { nowSeconds: 1000 }), false, "other body");
    assert.equal(verifySignature("other", header, "body", { nowSeconds: 1000 }), false, "other key");
    assert.equal(verifySignature("k", "garbage", "body", { nowSeconds: 1000 }), false);
    assert.equal(verifySignature("k", undefined, "body", { nowSeconds: 1000 }), false);
});

test("parses the header as the daemon's verifier does", () => {
    const mac = signWebhook("k", 1000, "b").split(",v1=")[1] ?? "";
    const ok = (header: string): boolean => verifySignature("k", header, "b", { nowSeconds: 1000 });
    assert.equal(ok(`v1=${mac},t=1000`), true, "order does not matter");
    assert.equal(ok(`t=1000,v0=abc,v1=${mac}`), true, "unknown keys are ignored");
    for (const t of ["+1000", "01000", " 1000", "1000 ", "1e3", "-1000", "", "0x3e8", "１０００"]) {
        assert.equal(ok(`t=${t},v1=${mac}`), false, `t written otherwise than the sender writes it: ${JSON.stringify(t)}`);
    }
    assert.equal(ok(`t=1000,v1=${mac}`), true);
    assert.equal(ok(`t=1000,v1=${mac},t=x`), false, "a later unreadable t replaces the earlier one");
    assert.equal(ok(`t=1000,v1=${mac},v1=00`), false, "the last v1 counts");
    assert.equal(ok(`t=1000, v1=${mac}`), false, "parts are not trimmed");
    assert.equal(ok(`t=1000,v1=${mac.toUpperCase()}`), false, "hex is compared as sent, lower case");
    assert.equal(ok(`t=18446744073709551616,v1=${mac}`), false, "t beyond u64");
});

test("accepts the raw body as bytes and any of several secrets", () => {
    const body = Buffer.from('{"state":"CONFIRMED"}', "utf8");
    const header = signWebhook("new", 5, body);
    assert.equal(verifySignature(["old", "new"], header, body, { nowSeconds: 5 }), true);
    assert.equal(verifySignature(["old"], header, body, { nowSeconds: 5 }), false);
});

test("verifyWebhook parses a verified body and says why it refuses", () => {
    const body = '{"id":"backend:1-2","webhook":"backend","state":"CONFIRMED"}';
    const headers = {
        "x-txmgr-signature": signWebhook("k", 10, body),
        "x-txmgr-delivery": "backend:1-2",
        "x-txmgr-attempt": "2",
        "x-txmgr-event": "CONFIRMED",
    };
    const delivery = verifyWebhook("k", headers, body, { nowSeconds: 10 });
    assert.equal(delivery.event.id, "backend:1-2");
    assert.equal(delivery.attempt, 2);
    assert.equal(delivery.eventName, "CONFIRMED");
    const refusal = (run: () => unknown): string => {
        try {
            run();
        } catch (error) {
            assert.ok(error instanceof WebhookVerificationError);
            return error.reason;
        }
        return "accepted";
    };
    assert.equal(refusal(() => verifyWebhook("k", {}, body, { nowSeconds: 10 })), "missing_signature");
    assert.equal(refusal(() => verifyWebhook("k", headers, `${body} `, { nowSeconds: 10 })), "bad_signature");
    assert.equal(refusal(() => verifyWebhook("k", headers, body, { nowSeconds: 1000 })), "stale_timestamp");
    const notObject = { "x-txmgr-signature": signWebhook("k", 10, "[]") };
    assert.equal(refusal(() => verifyWebhook("k", notObject, "[]", { nowSeconds: 10 })), "bad_body");
});
