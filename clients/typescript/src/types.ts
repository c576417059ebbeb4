/**
 * The wire types, as aliases of the types generated from the daemon's OpenAPI
 * document (`src/schema.d.ts`, `npm run gen:types`). The rest of the SDK names
 * schemas only through this file, so a regenerated schema that renames or
 * reshapes one breaks the build here, in one place.
 *
 * @packageDocumentation
 */

import type { components } from "./schema.js";

type Schemas = components["schemas"];

/** The `POST /v1/transactions` body exactly as the daemon reads it. */
export type CreateBody = Schemas["CreateBody"];
/** An amount of wei as a string, decimal (`"1000"`) or `0x` hex (`"0x3e8"`). */
export type WeiString = Schemas["WeiString"];
/** The answer to a create: `{chain_id, tx_id, state, submitter, request_id}`. */
export type Created = Schemas["CreatedBody"];
/** One managed transaction as `GET /v1/transactions/{tx_id}` shows it. */
export type TxView = Schemas["TxView"];
/** The parts of a receipt a client needs (inside {@link TxView}). */
export type ReceiptView = Schemas["ReceiptView"];
/** Lifecycle state of an intent (`QUEUED` … `CANCELLED`). */
export type TxState = Schemas["TxState"];
/** Finer detail within a state (`awaiting_receipt`, `mined`, `expired`, …). */
export type SubState = Schemas["SubState"];
/** One page of `GET /v1/transactions?submitter=…`: `{items, next}`. */
export type Page = Schemas["Page"];
/** One page of the completion feed: `{items, next_after}`. */
export type FeedPage = Schemas["FeedPage"];
/** One row of the completion feed. */
export type CompletionRow = Schemas["CompletionRow"];
/** The event of a feed row (its `state`): a terminal state, `STUCK`, `REORGED_OUT` or a funds event. */
export type FeedEvent = Schemas["FeedEvent"];
/** The answer to cancel / speedup / rebroadcast / requeue. */
export type ActionAccepted = Schemas["ActionAccepted"];
/** The optional body of an action: `{reason}`. */
export type ActionBody = Schemas["ActionBody"];
/** The body of every error answer: `{"error": {...}}`. */
export type ErrorResponse = Schemas["ErrorResponse"];
/** Inside {@link ErrorResponse}: `code`, `message`, and `field` / `rule` / `owner` / `issues` when they apply. */
export type ErrorDetail = Schemas["ErrorDetail"];
/** One problem of a rejected configuration (`invalid_config`). */
export type ErrorIssue = Schemas["ErrorIssue"];
/** Every machine `code` the daemon's errors carry (a closed set in the document). */
export type ErrorCode = ErrorDetail["code"];

/**
 * The JSON body of a webhook delivery: the feed row plus the delivery id
 * (`id`, the same as the `x-txmgr-delivery` header: deduplicate on it) and
 * the webhook's name. In the document as a component (no route answers it).
 */
export type WebhookEvent = Schemas["WebhookEvent"];

/**
 * The states an intent never leaves (`TxState::is_terminal` in
 * `actors/src/domain/state.rs`). `STUCK` is not one: a stuck transaction may
 * still confirm. A final state can still be corrected by a reorg deeper than
 * the finality setting (a `REORGED_OUT` feed row), which is rare by design.
 */
export const FINAL_STATES = ["CONFIRMED", "FAILED_FINAL", "REJECTED", "CANCELLED"] as const satisfies readonly TxState[];

/** One of {@link FINAL_STATES}. */
export type FinalState = (typeof FINAL_STATES)[number];

/** Whether `state` (a {@link TxState} or a feed row's {@link FeedEvent}) is final. */
export function isFinal(state: TxState | FeedEvent): state is FinalState {
    return (FINAL_STATES as readonly string[]).includes(state);
}
