/**
 * Verifying the daemon's webhook deliveries (README "Webhooks"):
 *
 * ```text
 * x-txmgr-signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<raw body>")>
 * ```
 *
 * The parsing mirrors the daemon's own verifier
 * (`actors/src/webhook/signature.rs`, `verify`) rule for rule, so that both
 * accept exactly the same headers:
 * - the header is split on `,`; each part on its first `=`; parts are not
 *   trimmed; unknown keys are ignored; a later `t` or `v1` replaces an
 *   earlier one;
 * - `t` must be written as the sender writes it: ASCII decimal digits, no
 *   sign, no leading zero, at most 2^64-1 (`+1700000000`, `01700000000`,
 *   ` 1700000000` are refused, not read as the number they spell); a `t`
 *   written otherwise counts as none;
 * - the MAC is computed over `t` exactly as written, a `.`, and the raw body
 *   bytes;
 * - `|now - t| <= tolerance` (a timestamp from the future is bounded too);
 * - `v1` must equal the lower-case hex MAC byte for byte, compared in
 *   constant time (`timingSafeEqual`).
 *
 * Verify the raw body as received, before any JSON parsing: a re-serialised
 * body differs in bytes and fails.
 *
 * @packageDocumentation
 */

import { createHmac, timingSafeEqual } from "node:crypto";

import type { WebhookEvent } from "./types.js";

/** The header carrying the signature. */
export const SIGNATURE_HEADER = "x-txmgr-signature";
/** The header with the delivery id, the same on every attempt of one event: deduplicate on it. */
export const DELIVERY_HEADER = "x-txmgr-delivery";
/** The header with the attempt number (1 for the first). */
export const ATTEMPT_HEADER = "x-txmgr-attempt";
/** The header with the event name (`CONFIRMED`, `LOW_BALANCE`, …). */
export const EVENT_HEADER = "x-txmgr-event";

/** Default tolerance (s) between the signature's timestamp and the receiver's clock. */
export const DEFAULT_TOLERANCE_SECONDS = 300;

/**
 * A webhook secret: the text of the webhook's `secret_file` (the daemon
 * trims surrounding whitespace from it) or `secret_env`, or its bytes.
 * Several secrets are accepted while one is being rotated.
 */
export type WebhookSecret = string | Uint8Array | readonly (string | Uint8Array)[];

/** Options of the verifiers. */
export interface VerifyOptions {
    /** Largest accepted distance (s) between `t` and now; default {@link DEFAULT_TOLERANCE_SECONDS}. */
    toleranceSeconds?: number | undefined;
    /** Now, in unix seconds (tests); default the system clock. */
    nowSeconds?: number | undefined;
}

/** Why a delivery was refused. */
export type WebhookRefusal =
    /** No `x-txmgr-signature` header. */
    | "missing_signature"
    /** The header lacks a readable `t` or a `v1`. */
    | "malformed_signature"
    /** `t` is further from now than the tolerance (a replay, or a skewed clock). */
    | "stale_timestamp"
    /** The MAC does not match: another body, another secret, or a forgery. */
    | "bad_signature"
    /** The verified body is not a JSON object. */
    | "bad_body";

/** A delivery that failed verification. Answer it with a 4xx, which the daemon does not retry. */
export class WebhookVerificationError extends Error {
    /** What failed. */
    readonly reason: WebhookRefusal;

    /** `reason` is also the start of the message. */
    constructor(reason: WebhookRefusal, detail: string) {
        super(`${reason}: ${detail}`);
        this.name = "WebhookVerificationError";
        this.reason = reason;
    }
}

/** A verified delivery. */
export interface VerifiedDelivery {
    /** The parsed body. */
    event: WebhookEvent;
    /** `x-txmgr-delivery` (equal to `event.id`): the same on every attempt of one event. */
    deliveryId: string | undefined;
    /** `x-txmgr-attempt`, 1 for the first. */
    attempt: number | undefined;
    /** `x-txmgr-event` (equal to `event.state`). */
    eventName: string | undefined;
}

/**
 * The headers of a request: a fetch `Headers` (web frameworks), or Node's
 * `IncomingHttpHeaders` (`req.headers` in `node:http`, Express, Fastify).
 */
export type RequestHeaders = Headers | Readonly<Record<string, string | readonly string[] | undefined>>;

const U64_MAX = 18446744073709551615n;

/**
 * Checks one `x-txmgr-signature` value against the raw body: true when a
 * secret's MAC matches and the timestamp is within the tolerance. Accepts
 * exactly what the daemon's own `verify` accepts (see the module comment).
 */
export function verifySignature(
    secret: WebhookSecret,
    header: string | null | undefined,
    rawBody: string | Uint8Array,
    options: VerifyOptions = {},
): boolean {
    return refusalOf(secret, header, rawBody, options) === undefined;
}

/**
 * Verifies a delivery and parses it: the signature (as
 * {@link verifySignature}), then the body as a JSON object. Throws
 * {@link WebhookVerificationError} saying why otherwise.
 *
 * @example
 * ```ts
 * // Express: keep the raw bytes for this route.
 * app.post("/txmgr", express.raw({ type: "application/json" }), (req, res) => {
 *     try {
 *         const { event } = verifyWebhook(process.env.TXMGR_WEBHOOK_SECRET!, req.headers, req.body);
 *         // handle event (deduplicate on event.id), then:
 *         res.sendStatus(204);
 *     } catch (e) {
 *         res.sendStatus(e instanceof WebhookVerificationError ? 401 : 500);
 *     }
 * });
 * ```
 */
export function verifyWebhook(
    secret: WebhookSecret,
    headers: RequestHeaders,
    rawBody: string | Uint8Array,
    options: VerifyOptions = {},
): VerifiedDelivery {
    const refusal = refusalOf(secret, headerOf(headers, SIGNATURE_HEADER), rawBody, options);
    if (refusal !== undefined) throw new WebhookVerificationError(refusal, describe(refusal));
    const text = typeof rawBody === "string" ? rawBody : Buffer.from(rawBody).toString("utf8");
    let event: unknown;
    try {
        event = JSON.parse(text);
    } catch (error) {
        throw new WebhookVerificationError("bad_body", error instanceof Error ? error.message : String(error));
    }
    if (typeof event !== "object" || event === null || Array.isArray(event)) {
        throw new WebhookVerificationError("bad_body", "the body is not a JSON object");
    }
    const attempt = headerOf(headers, ATTEMPT_HEADER);
    return {
        event: event as WebhookEvent,
        deliveryId: headerOf(headers, DELIVERY_HEADER),
        attempt: attempt !== undefined && /^[0-9]+$/.test(attempt) ? Number(attempt) : undefined,
        eventName: headerOf(headers, EVENT_HEADER),
    };
}

/**
 * The `x-txmgr-signature` value the daemon would send for `rawBody` at
 * `unixSeconds` (`actors/src/webhook/signature.rs`, `sign`): for tests of a
 * receiver.
 */
export function signWebhook(secret: string | Uint8Array, unixSeconds: number | bigint, rawBody: string | Uint8Array): string {
    const t = BigInt(unixSeconds);
    return `t=${t},v1=${hexMac(secret, t, rawBody)}`;
}

/** Why `header` fails for `rawBody`, or undefined when it passes. */
function refusalOf(
    secret: WebhookSecret,
    header: string | null | undefined,
    rawBody: string | Uint8Array,
    options: VerifyOptions,
): WebhookRefusal | undefined {
    if (header === null || header === undefined) return "missing_signature";
    let t: bigint | undefined;
    let v1: string | undefined;
    for (const part of header.split(",")) {
        const eq = part.indexOf("=");
        if (eq < 0) continue;
        const key = part.slice(0, eq);
        const value = part.slice(eq + 1);
        if (key === "t") t = parseCanonicalSeconds(value);
        else if (key === "v1") v1 = value;
    }
    if (t === undefined || v1 === undefined) return "malformed_signature";
    const toleranceSeconds = options.toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS;
    if (!Number.isFinite(toleranceSeconds)) throw new RangeError("toleranceSeconds must be a finite number");
    const tolerance = BigInt(Math.max(0, Math.floor(toleranceSeconds)));
    const now = BigInt(Math.floor(options.nowSeconds ?? Date.now() / 1000));
    const distance = now > t ? now - t : t - now;
    if (distance > tolerance) return "stale_timestamp";
    const given = Buffer.from(v1, "utf8");
    const secrets: readonly (string | Uint8Array)[] =
        typeof secret === "string" || secret instanceof Uint8Array ? [secret] : secret;
    let matched = false;
    for (const candidate of secrets) {
        const expected = Buffer.from(hexMac(candidate, t, rawBody), "ascii");
        // Lengths are public (a hex SHA-256 is 64 characters); the bytes are compared in constant time.
        if (expected.length === given.length && timingSafeEqual(expected, given)) matched = true;
    }
    return matched ? undefined : "bad_signature";
}

/**
 * `t=` as the daemon writes it — decimal digits, no sign, no leading zero, at
 * most 2^64-1 — or undefined (`canonical_seconds` in the daemon's verifier).
 */
function parseCanonicalSeconds(value: string): bigint | undefined {
    if (!/^(0|[1-9][0-9]*)$/.test(value)) return undefined;
    const parsed = BigInt(value);
    return parsed <= U64_MAX ? parsed : undefined;
}

/** Lower-case hex of HMAC-SHA256(secret, "<t>.<body>"). */
function hexMac(secret: string | Uint8Array, t: bigint, rawBody: string | Uint8Array): string {
    return createHmac("sha256", secret).update(`${t}.`).update(rawBody).digest("hex");
}

/** One header's value, whatever the container; the first of repeated ones. */
function headerOf(headers: RequestHeaders, name: string): string | undefined {
    if (typeof (headers as Headers).get === "function") return (headers as Headers).get(name) ?? undefined;
    const record = headers as Readonly<Record<string, string | readonly string[] | undefined>>;
    let value = record[name];
    if (value === undefined) {
        const key = Object.keys(record).find((k) => k.toLowerCase() === name);
        value = key === undefined ? undefined : record[key];
    }
    return typeof value === "string" ? value : value?.[0];
}

/** The message of a refusal. */
function describe(refusal: WebhookRefusal): string {
    switch (refusal) {
        case "missing_signature":
            return `no ${SIGNATURE_HEADER} header`;
        case "malformed_signature":
            return `${SIGNATURE_HEADER} lacks a readable t= or a v1=`;
        case "stale_timestamp":
            return "the signature's timestamp is outside the tolerance";
        case "bad_signature":
            return "the signature does not match the body and secret";
        case "bad_body":
            return "the body is not a JSON object";
    }
}
