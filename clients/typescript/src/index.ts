/**
 * `@txmgr/client`: the TypeScript SDK of txmgr, the daemon that sends EVM
 * transactions for backend services.
 *
 * ```text
 * TxmgrClient ─ create (request_id always, retried) ─ get / getByRequestId / list / listAll
 *             ─ cancel / speedUp / rebroadcast / requeue
 *             ─ waitFinal (one id: GETs with backoff; many: the completion feed)
 *             ─ follow (feed pages with the cursor to store) ── feed.ts
 * verifyWebhook / verifySignature (HMAC-SHA256, timestamp tolerance) ── webhook.ts
 * TxmgrError {status, code, field, message, retryAfter} ── errors.ts
 * backoff with jitter honouring Retry-After ── retry.ts
 * wire types generated from GET /v1/openapi.json ── schema.d.ts via types.ts
 * ```
 *
 * @packageDocumentation
 */

export {
    TxmgrClient,
    VERSION,
    type ActionOptions,
    type CallOptions,
    type CreateInput,
    type CreateResult,
    type ListQuery,
    type TxmgrClientOptions,
    type WaitOptions,
    type Wei,
} from "./client.js";
export {
    TxmgrError,
    TxmgrTransportError,
    UNEXPECTED_RESPONSE,
    WaitTimeoutError,
    isRetryableError,
} from "./errors.js";
export { followFeed, waitFinalByFeed, type FeedBatch, type FeedQuery, type FeedSource, type FollowOptions } from "./feed.js";
export {
    DEFAULT_RETRY_POLICY,
    backoffDelay,
    isRetryable,
    parseRetryAfter,
    sleep,
    type AttemptFailure,
    type RetryMode,
    type RetryPolicy,
} from "./retry.js";
export {
    FINAL_STATES,
    isFinal,
    type ActionAccepted,
    type ActionBody,
    type CompletionRow,
    type CreateBody,
    type Created,
    type ErrorCode,
    type ErrorDetail,
    type ErrorIssue,
    type ErrorResponse,
    type FeedEvent,
    type FeedPage,
    type FinalState,
    type Page,
    type ReceiptView,
    type SubState,
    type TxState,
    type TxView,
    type WebhookEvent,
    type WeiString,
} from "./types.js";
export {
    ATTEMPT_HEADER,
    DEFAULT_TOLERANCE_SECONDS,
    DELIVERY_HEADER,
    EVENT_HEADER,
    SIGNATURE_HEADER,
    WebhookVerificationError,
    signWebhook,
    verifySignature,
    verifyWebhook,
    type RequestHeaders,
    type VerifiedDelivery,
    type VerifyOptions,
    type WebhookRefusal,
    type WebhookSecret,
} from "./webhook.js";
