//! One write per batch on the way out: the leader draws nonces from its own
//! copy of the cursor, signs, and hands allocation and attempts to the group
//! committer as one fenced write (README "How an intent is executed").
//!
//! The leader is the only writer of its submitter's cursor while it holds
//! the fenced lease, so its copy is what the row says — unless another path
//! (a sweep, a filler, a released nonce, an operator) moved it. The write
//! checks that under the cursor's row lock: the row must still say what the
//! leader drew from, and every signed intent must still be QUEUED. If not,
//! nothing of the draw is written, the copy is dropped and read again, and
//! the bytes signed for it are thrown away: they never left the process.
//!
//! Nothing is written before that one commit, so a crash before it loses
//! nothing (the intents are QUEUED, the cursor unmoved) and one after it
//! leaves ALLOCATED intents with their attempts, which recovery re-sends.

use uuid::Uuid;

use super::{
    error::LeaderError,
    signing::{sign_all, Signed},
    SubmitterContext,
};
use crate::{
    chain::FeeQuote,
    domain::Intent,
    store::{group::Presigned, nonce_cursor, nonce_cursor::NonceCursor},
};

/// A batch drawn from the leader's cursor copy and signed.
#[derive(Debug)]
pub(crate) struct Drawn {
    /// What the fenced write checks and writes.
    pub(crate) presigned: Presigned,
    /// The cursor once the write holds.
    pub(crate) after: NonceCursor,
    /// The signing's result: `attempts` are those of `presigned` (the
    /// intents before the first one not signed); `refused` intents are
    /// rejected by the write without a nonce.
    pub(crate) signed: Signed,
    /// Intents signed or priced but left QUEUED for the next cycle (they
    /// came after one that was not signed).
    pub(crate) left_queued: usize,
}

/// The leader's copy of its cursor, read when it has none (or when its copy
/// says PROTECT, which an operator may have cleared since). `None` when
/// there is no usable cursor (no row, or PROTECT): the caller allocates in
/// the database instead.
pub(crate) async fn usable_cursor(
    ctx: &SubmitterContext,
    cursor: &mut Option<NonceCursor>,
) -> Result<Option<NonceCursor>, LeaderError> {
    if cursor.as_ref().is_none_or(|c| c.protect_reason.is_some()) {
        *cursor = nonce_cursor::load(&ctx.pool, ctx.key).await?;
    }
    Ok(cursor.clone().filter(|c| c.protect_reason.is_none()))
}

/// Draws a nonce for each of `ready` (in this order) from `from`, the
/// leader's copy of the cursor, and signs them.
pub(crate) async fn draw_and_sign(
    ctx: &SubmitterContext,
    from: NonceCursor,
    ready: Vec<(Uuid, Intent)>,
    quote: &FeeQuote,
) -> Drawn {
    let mut drawing = from.clone();
    let nonces = drawing.draw(ready.len());
    let prepared: Vec<(Uuid, u64, Intent)> = ready
        .into_iter()
        .zip(nonces)
        .map(|((id, intent), nonce)| (id, nonce, intent))
        .collect();
    let mut signed = sign_all(ctx, &prepared, quote).await;

    // Nonces must follow each other without a hole: only the intents before
    // the first one not signed keep theirs. A refused intent is rejected
    // (it needs no nonce for that); the rest wait QUEUED.
    let mut by_id: std::collections::HashMap<Uuid, _> = std::mem::take(&mut signed.attempts)
        .into_iter()
        .map(|attempt| (attempt.tx_id, attempt))
        .collect();
    for (tx_id, _, _) in &prepared {
        match by_id.remove(tx_id) {
            Some(attempt) => signed.attempts.push(attempt),
            None => break,
        }
    }
    let left_queued = prepared
        .len()
        .saturating_sub(signed.attempts.len() + signed.refused.len());
    let mut after = from.clone();
    after.draw(signed.attempts.len());
    Drawn {
        presigned: Presigned {
            from: (from.next_nonce, from.released.clone()),
            attempts: signed.attempts.clone(),
        },
        after,
        signed,
        left_queued,
    }
}
