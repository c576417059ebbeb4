/**
 * A create whose answer is lost lands exactly once: the daemon is SIGKILLed
 * after it committed a create and before the answer reached the client,
 * then restarted; the SDK's retries (same request_id) find the stored
 * intent. A proxy in front of the daemon does the timing.
 *
 * ```text
 * SDK ─► proxy ─► daemon: 202 committed ─► proxy: SIGKILL daemon, drop the client's connection, restart daemon
 *  └─ retry (same request_id) ─► proxy ─► (down: connection dropped) … ─► daemon up: 200, the same tx_id
 * ```
 */

import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type Server } from "node:http";
import { after, before, test, type TestContext } from "node:test";

import { TxmgrClient, TxmgrTransportError, type CreateInput } from "@txmgr/client";

import { DEV_KEYS, Fixture, SINK, newToken } from "./harness.js";

const SUBMITTER = DEV_KEYS[0]![1];
const token = newToken("svc");
let fx: Fixture;
let proxy: KillingProxy;

/** What the proxy saw of one create. */
interface SeenCreate {
    requestId: string | undefined;
    /** The daemon's status, or undefined when the daemon could not be reached. */
    status: number | undefined;
    /** The daemon's answer body. */
    answer: string | undefined;
    /** Whether the answer was withheld from the client. */
    dropped: boolean;
}

/**
 * Forwards every request to the daemon. `onCreateAnswered`, when set, runs
 * once the daemon has answered the next create, before the answer is
 * relayed — and then the client's connection is dropped instead. While the
 * daemon is down, connections are dropped (no answer at all).
 */
class KillingProxy {
    readonly creates: SeenCreate[] = [];
    onCreateAnswered: (() => Promise<void>) | undefined;
    /** Withhold every create's answer (the daemon still gets and commits each). */
    dropAllCreateAnswers = false;
    private server: Server | undefined;
    port = 0;

    constructor(private readonly target: string) {}

    async listen(): Promise<void> {
        this.server = createServer((req, res) => {
            void this.handle(req).then((answer) => {
                if (answer === undefined) {
                    req.socket.destroy();
                    return;
                }
                res.writeHead(answer.status, { "content-type": answer.contentType, ...answer.retryAfter });
                res.end(answer.body);
            });
        });
        await new Promise<void>((resolve) => this.server!.listen(0, "127.0.0.1", resolve));
        const address = this.server.address();
        this.port = typeof address === "object" && address !== null ? address.port : 0;
    }

    private async handle(
        req: IncomingMessage,
    ): Promise<{ status: number; contentType: string; retryAfter: Record<string, string>; body: string } | undefined> {
        const chunks: Buffer[] = [];
        for await (const chunk of req) chunks.push(chunk as Buffer);
        const body = Buffer.concat(chunks).toString("utf8");
        const isCreate = req.method === "POST" && req.url === "/v1/transactions";
        const seen: SeenCreate | undefined = isCreate
            ? { requestId: (JSON.parse(body) as { request_id?: string }).request_id, status: undefined, answer: undefined, dropped: false }
            : undefined;
        if (seen !== undefined) this.creates.push(seen);
        const headers: Record<string, string> = {};
        for (const name of ["authorization", "content-type", "accept", "user-agent"]) {
            const value = req.headers[name];
            if (typeof value === "string") headers[name] = value;
        }
        let response: Response;
        let text: string;
        try {
            response = await fetch(`${this.target}${req.url ?? "/"}`, {
                method: req.method,
                headers,
                body: req.method === "GET" ? undefined : body,
            });
            text = await response.text();
        } catch {
            return undefined; // the daemon is down: no answer, as a dead backend behind a load balancer
        }
        if (seen !== undefined) {
            seen.status = response.status;
            seen.answer = text;
            const hook = this.onCreateAnswered;
            if (hook !== undefined || this.dropAllCreateAnswers) {
                this.onCreateAnswered = undefined;
                seen.dropped = true;
                await hook?.();
                return undefined;
            }
        }
        const retryAfter = response.headers.get("retry-after");
        return {
            status: response.status,
            contentType: response.headers.get("content-type") ?? "application/json",
            retryAfter: retryAfter === null ? {} : { "retry-after": retryAfter },
            body: text,
        };
    }

    close(): Promise<void> {
        return new Promise((resolve) => {
            this.server?.closeAllConnections();
            this.server?.close(() => resolve());
        });
    }
}

before(async () => {
    fx = await Fixture.start({ name: "crash", tokens: [token] });
    proxy = new KillingProxy(fx.daemon.base);
    await proxy.listen();
});

after(async () => {
    await proxy?.close();
    await fx?.close();
});

/** A client through the proxy whose retries outlast a daemon restart (about 20 s). */
function proxied(): TxmgrClient {
    return new TxmgrClient({
        baseUrl: `http://127.0.0.1:${proxy.port}`,
        token: token.token,
        retry: { maxAttempts: 60, initialDelayMs: 100, maxDelayMs: 400 },
        requestTimeoutMs: 5_000,
    });
}

/** A client straight to the daemon. */
function direct(): TxmgrClient {
    return new TxmgrClient({ baseUrl: fx.daemon.base, token: token.token });
}

/** Kills the daemon (SIGKILL) and starts it again, without waiting for it. */
async function crashAndRestart(): Promise<void> {
    await fx.daemon.kill();
    fx.daemon.spawn();
}

/**
 * Sends `input` through the proxy with a crash after the daemon's first
 * answer; checks the create landed once; returns its tx_id.
 */
async function createAcrossCrash(input: CreateInput, t: TestContext): Promise<{ txId: string; requestId: string }> {
    const first = proxy.creates.length;
    proxy.onCreateAnswered = crashAndRestart;
    const result = await proxied().create(input);
    const seen = proxy.creates.slice(first);

    t.diagnostic(
        `request_id ${seen[0]?.requestId}: attempts as the proxy saw them: ` +
            seen.map((s) => `${s.status ?? "daemon down"}${s.dropped ? " (answer dropped, daemon killed)" : ""}`).join(", "),
    );
    // The first attempt reached the daemon, was committed (202), and its answer was lost.
    assert.ok(seen.length >= 2, `attempts: ${JSON.stringify(seen)}`);
    assert.equal(seen[0]!.status, 202);
    assert.equal(seen[0]!.dropped, true);
    const committed = JSON.parse(seen[0]!.answer!) as { tx_id: string; request_id: string };
    // Every attempt carried the same request_id, and the last found the intent stored.
    const requestId = seen[0]!.requestId;
    assert.ok(requestId !== undefined && requestId !== "");
    for (const attempt of seen) assert.equal(attempt.requestId, requestId);
    assert.equal(result.request_id, requestId);
    assert.equal(result.replayed, true, "the retry was answered 200, a replay");
    assert.equal(result.tx_id, committed.tx_id);
    assert.equal(seen.at(-1)!.status, 200);

    // Exactly one intent holds the request_id.
    const txmgr = direct();
    const rows = [];
    for await (const tx of txmgr.listAll({ submitter: SUBMITTER })) if (tx.request_id === requestId) rows.push(tx);
    assert.equal(rows.length, 1);
    assert.equal(rows[0]!.tx_id, committed.tx_id);
    assert.equal((await txmgr.getByRequestId(SUBMITTER, requestId)).tx_id, committed.tx_id);
    return { txId: committed.tx_id, requestId };
}

test("a create whose answer a SIGKILL lost lands exactly once, with the caller's request_id and with a generated one", async (t) => {
    await fx.logged(async () => {
        const given = await createAcrossCrash({ submitter: SUBMITTER, to: SINK, value: 1n, request_id: "order-crash-1" }, t);
        assert.equal(given.requestId, "order-crash-1");

        // No request_id given: the SDK generated one and sent it on every attempt.
        const generated = await createAcrossCrash({ submitter: SUBMITTER, to: SINK, value: 2n }, t);
        assert.match(generated.requestId, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);

        // A create that never got an answer (every answer withheld) tells its
        // generated request_id; a later create with it finds the same intent.
        const first = proxy.creates.length;
        proxy.dropAllCreateAnswers = true;
        const lost = await proxied()
            .create({ submitter: SUBMITTER, to: SINK, value: 3n }, { retry: { maxAttempts: 2, initialDelayMs: 50 } })
            .then(
                () => assert.fail("no answer was relayed"),
                (error: unknown) => error,
            );
        proxy.dropAllCreateAnswers = false;
        assert.ok(lost instanceof TxmgrTransportError, String(lost));
        const seen = proxy.creates.slice(first);
        assert.equal(seen.length, 2);
        assert.deepEqual(
            seen.map((s) => [s.requestId, s.status]),
            [
                [lost.requestId, 202],
                [lost.requestId, 200],
            ],
        );
        const again = await direct().create({ submitter: SUBMITTER, to: SINK, value: 3n, request_id: lost.requestId });
        assert.equal(again.replayed, true);
        assert.equal(again.tx_id, (JSON.parse(seen[0]!.answer!) as { tx_id: string }).tx_id);

        // Each intent is sent once: three confirmed, three nonces used.
        const txmgr = direct();
        for (const id of [given.txId, generated.txId, again.tx_id]) {
            assert.equal((await txmgr.waitFinal(id, 60_000)).state, "CONFIRMED");
        }
        const page = await txmgr.list({ submitter: SUBMITTER });
        assert.equal(page.items.length, 3);
        assert.equal(await fx.anvil.nonce(SUBMITTER), 3);
    })();
});
