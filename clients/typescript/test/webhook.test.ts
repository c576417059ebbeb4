/**
 * Webhooks from a real daemon: every delivery it signs verifies; the same
 * delivery with a changed body, a wrong secret, an old timestamp or a `t`
 * written otherwise is refused. And the README's integration snippet, run
 * as it is printed there (the last test checks that the two agree).
 */

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import { after, before, test } from "node:test";

import { TxmgrClient, WebhookVerificationError, verifyWebhook, type WebhookEvent, type WebhookRefusal } from "@txmgr/client";

import { DEV_KEYS, Fixture, SINK, eventually, freePort, newToken } from "./harness.js";

const SECRET = "whsec-ts-test-0123456789";
const svc = newToken("svc");
let fx: Fixture;
let recorder: Server;
/** Every delivery the recording receiver got, as received. */
const deliveries: { headers: IncomingHttpHeaders; body: Buffer; refusal: WebhookRefusal | undefined }[] = [];
/** The port the README snippet's receiver listens on (the daemon's second webhook). */
let snippetPort: number;

before(async () => {
    recorder = createServer((req, res) => {
        const chunks: Buffer[] = [];
        req.on("data", (chunk: Buffer) => chunks.push(chunk));
        req.on("end", () => {
            const body = Buffer.concat(chunks);
            let refusal: WebhookRefusal | undefined;
            try {
                verifyWebhook(SECRET, req.headers, body);
            } catch (error) {
                if (!(error instanceof WebhookVerificationError)) throw error;
                refusal = error.reason;
            }
            deliveries.push({ headers: req.headers, body, refusal });
            res.writeHead(refusal === undefined ? 204 : 401).end();
        });
    });
    await new Promise<void>((resolve) => recorder.listen(0, "127.0.0.1", resolve));
    const address = recorder.address();
    const recorderPort = typeof address === "object" && address !== null ? address.port : 0;
    snippetPort = await freePort();
    const webhook = (name: string, port: number): string =>
        `[[webhooks]]\nname = "${name}"\nurl = "http://127.0.0.1:${port}/txmgr"\nsecret_env = "TS_WEBHOOK_SECRET"\n` +
        `backoff_initial = "50ms"\nbackoff_max = "200ms"\ntimeout = "2s"\nmax_attempts = 100\nstart_at = "beginning"\n`;
    fx = await Fixture.start({
        name: "webhook",
        tokens: [svc],
        extra: webhook("recorder", recorderPort) + webhook("snippet", snippetPort),
        env: { TS_WEBHOOK_SECRET: SECRET },
    });
});

after(async () => {
    await fx?.close();
    recorder?.closeAllConnections();
    recorder?.close();
});

/** Why `verifyWebhook` refuses, or "accepted". */
function refusalOf(run: () => unknown): WebhookRefusal | "accepted" {
    try {
        run();
    } catch (error) {
        if (error instanceof WebhookVerificationError) return error.reason;
        throw error;
    }
    return "accepted";
}

test("the daemon's real deliveries verify; a changed body, a wrong secret, an old or non-canonical timestamp do not", async () => {
    await fx.logged(async () => {
        const txmgr = new TxmgrClient({ baseUrl: fx.daemon.base, token: svc.token });
        const { tx_id } = await txmgr.create({ submitter: DEV_KEYS[0]![1], to: SINK, value: 7n, request_id: "webhook-1" });
        const delivery = await eventually("the CONFIRMED delivery", 30_000, async () =>
            deliveries.find((d) => (JSON.parse(d.body.toString("utf8")) as WebhookEvent).tx_id === tx_id),
        );

        // Every delivery the daemon made verified (and was answered 204).
        assert.deepEqual(
            deliveries.map((d) => d.refusal),
            deliveries.map(() => undefined),
        );
        const { headers, body } = delivery;
        const verified = verifyWebhook(SECRET, headers, body);
        assert.equal(verified.event.state, "CONFIRMED");
        assert.equal(verified.event.tx_id, tx_id);
        assert.equal(verified.event.request_id, "webhook-1");
        assert.equal(verified.event.webhook, "recorder");
        assert.equal(verified.event.id, verified.deliveryId);
        assert.equal(verified.eventName, verified.event.state);
        assert.equal(verified.attempt, 1);

        const signature = String(headers["x-txmgr-signature"]);
        const t = Number(/(?:^|,)t=([0-9]+)/.exec(signature)?.[1]);
        assert.ok(Math.abs(Date.now() / 1000 - t) < 60, signature);

        // One byte of the body changed.
        const changed = Buffer.from(body);
        const at = changed.indexOf('"CONFIRMED"') + 9;
        assert.ok(at > 9);
        changed[at] = "E".charCodeAt(0); // "CONFIRMEE"
        assert.equal(refusalOf(() => verifyWebhook(SECRET, headers, changed)), "bad_signature");
        // Another secret.
        assert.equal(refusalOf(() => verifyWebhook("not-the-secret", headers, body)), "bad_signature");
        // During a rotation both secrets are accepted.
        assert.equal(refusalOf(() => verifyWebhook(["not-the-secret", SECRET], headers, body)), "accepted");
        // Replayed later than the tolerance (default 300 s), or seen with a clock that far off.
        assert.equal(refusalOf(() => verifyWebhook(SECRET, headers, body, { nowSeconds: t + 301 })), "stale_timestamp");
        assert.equal(refusalOf(() => verifyWebhook(SECRET, headers, body, { nowSeconds: t + 300 })), "accepted");
        assert.equal(refusalOf(() => verifyWebhook(SECRET, headers, body, { nowSeconds: t - 301 })), "stale_timestamp");
        // Really later: a tolerance of 1 s, 2 s after the signature.
        await new Promise((resolve) => setTimeout(resolve, Math.max(0, (t + 2) * 1000 - Date.now()) + 50));
        assert.equal(refusalOf(() => verifyWebhook(SECRET, headers, body, { toleranceSeconds: 1 })), "stale_timestamp");
        // The same timestamp written otherwise than the daemon writes it.
        for (const written of [`+${t}`, `0${t}`, ` ${t}`]) {
            const altered = { ...headers, "x-txmgr-signature": signature.replace(`t=${t}`, `t=${written}`) };
            assert.equal(refusalOf(() => verifyWebhook(SECRET, altered, body)), "malformed_signature", written);
        }
        // No signature at all.
        const unsigned = { ...headers };
        delete unsigned["x-txmgr-signature"];
        assert.equal(refusalOf(() => verifyWebhook(SECRET, unsigned, body)), "missing_signature");
    })();
});

test("the README's integration snippet runs as printed", async () => {
    await fx.logged(async () => {
        // What the snippet takes from its surroundings.
        const TXMGR_URL = fx.daemon.base;
        const TXMGR_TOKEN = svc.token;
        const WEBHOOK_SECRET = SECRET;
        const WEBHOOK_PORT = snippetPort;
        const SUBMITTER = DEV_KEYS[0]![1];
        const CUSTOMER = DEV_KEYS[1]![1];
        const orderId = 42;
        const received: WebhookEvent[] = [];
        const onEvent = (event: WebhookEvent): void => void received.push(event);

        // ---- README snippet begin ----
        const txmgr = new TxmgrClient({ baseUrl: TXMGR_URL, token: TXMGR_TOKEN });

        // Webhook receiver: verify the raw body before parsing it; answer a forgery 4xx.
        const receiver = createServer(async (req, res) => {
            const chunks: Buffer[] = [];
            for await (const chunk of req) chunks.push(chunk);
            try {
                const { event } = verifyWebhook(WEBHOOK_SECRET, req.headers, Buffer.concat(chunks));
                onEvent(event); // at least once: deduplicate on event.id
                res.writeHead(204).end();
            } catch {
                res.writeHead(401).end();
            }
        }).listen(WEBHOOK_PORT);

        // A request_id you can derive again (the order's id): every retry lands on the same intent.
        const { tx_id } = await txmgr.create({ submitter: SUBMITTER, to: CUSTOMER, value: 10n ** 15n, request_id: `order-${orderId}` });
        const tx = await txmgr.waitFinal(tx_id, 60_000); // CONFIRMED, FAILED_FINAL, REJECTED or CANCELLED
        // ---- README snippet end ----

        try {
            assert.equal(tx.state, "CONFIRMED");
            assert.equal(tx.request_id, "order-42");
            const event = await eventually("the snippet's receiver gets the CONFIRMED event", 30_000, async () =>
                received.find((e) => e.tx_id === tx_id),
            );
            assert.deepEqual([event.state, event.webhook, event.request_id], ["CONFIRMED", "snippet", "order-42"]);
            assert.equal(event.tx_hash, tx.mined_tx_hash ?? tx.tx_hash);
        } finally {
            receiver.closeAllConnections();
            receiver.close();
        }
    })();
});

test("the README shows exactly the snippet this file runs", () => {
    const source = readFileSync(new URL("../test/webhook.test.ts", import.meta.url), "utf8");
    const region = /\/\/ ---- README snippet begin ----\n([\s\S]*?)\n\s*\/\/ ---- README snippet end ----/.exec(source)?.[1];
    assert.ok(region !== undefined, "the snippet markers are in the test");
    const dedent = (text: string): string[] => {
        const lines = text.split("\n");
        const indent = Math.min(...lines.filter((l) => l.trim() !== "").map((l) => /^ */.exec(l)![0].length));
        return lines.map((l) => l.slice(indent));
    };
    const readme = readFileSync(new URL("../README.md", import.meta.url), "utf8");
    const block = /<!-- snippet: test\/webhook\.test\.ts -->\n```ts\n([\s\S]*?)\n```/.exec(readme)?.[1];
    assert.ok(block !== undefined, "README has the snippet block");
    // The README's block is the test's region after its import lines.
    const shown = block.split("\n");
    while (shown[0]?.startsWith("import ") || shown[0] === "") shown.shift();
    assert.deepEqual(shown, dedent(region));
});
