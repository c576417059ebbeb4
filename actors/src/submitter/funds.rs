//! The leader's funds check (README "Funds"): on every sweep and after an
//! insufficient-funds refusal it reads the balance; a crossing of
//! `min_balance` flips the stored state and writes `LOW_BALANCE` or
//! `BALANCE_RESTORED` to the feed in one fenced transaction, so each
//! crossing is reported once however many nodes run. A downward crossing
//! with `top_up` configured also queues the funder's intent, under a request
//! id naming the submitter and the crossing, within the daily cap.

use std::time::Duration;

use alloy::primitives::U256;

use super::{error::LeaderError, SubmitterContext};
use crate::{
    domain::{FeedEvent, Intent, NewIntent, SubmitterKey},
    metrics::{FUNDS_EVENTS, SUBMITTER_BALANCE, TOP_UPS},
    store::{
        funds::{self, FundsState, TopUpQueued},
        FencedTx, LeaseGuard,
    },
    submitter::settings::TopUp,
};

/// The request id of the top-up of `submitter`'s `crossing`-th downward
/// crossing; `retry` > 0 for a further top-up of the same crossing after the
/// previous one failed.
pub fn top_up_request_id(submitter: &SubmitterKey, crossing: i64, retry: i64) -> String {
    let first = format!("txmgr-top-up:{}:{crossing}", submitter.address_hex());
    if retry == 0 {
        first
    } else {
        format!("{first}:{retry}")
    }
}

/// States in which a top-up did not (and will not) fund the submitter.
const FAILED_TOP_UP: &[&str] = &["REJECTED", "FAILED_FINAL", "CANCELLED"];

/// How much a top-up sends: up to `target`, within what is left of the
/// target's daily cap after `sent_today`, and of the funder's own daily
/// bound (`funder_max_per_day`) after `funder_sent_today`. Zero when
/// nothing may be sent.
pub fn top_up_amount(
    balance: u128,
    top_up: &TopUp,
    sent_today: u128,
    funder_sent_today: u128,
) -> u128 {
    let wanted = top_up.target.saturating_sub(balance);
    let left = top_up.max_per_day.saturating_sub(sent_today);
    let funder_left = top_up
        .funder_max_per_day
        .map_or(u128::MAX, |cap| cap.saturating_sub(funder_sent_today));
    wanted.min(left).min(funder_left)
}

/// First delay before a failed top-up of a crossing is sent again; it
/// doubles per failed one, up to [`MAX_RETRY_BACKOFF`]: an empty funder
/// does not make a new intent (with its audit, feed and webhook rows) on
/// every sweep.
pub const RETRY_BACKOFF: Duration = Duration::from_secs(10);

/// Longest delay between the failed top-ups of one crossing.
pub const MAX_RETRY_BACKOFF: Duration = Duration::from_secs(3600);

/// The wait after the `failed`-th failed top-up of a crossing.
pub fn retry_backoff(failed: i64) -> Duration {
    let doublings = u32::try_from(failed.saturating_sub(1).clamp(0, 20)).unwrap_or(20);
    RETRY_BACKOFF
        .saturating_mul(2u32.saturating_pow(doublings))
        .min(MAX_RETRY_BACKOFF)
}

/// Reads the balance and records a crossing, if any. Returns the balance
/// and whether it is below `min_balance` (None when `min_balance` is not
/// set: nothing is read). `known` is the stored state this leader last
/// saw under its current lease: when the balance agrees with it, nothing
/// can have changed and no database transaction is opened.
pub(crate) async fn check(
    ctx: &SubmitterContext,
    lease: &LeaseGuard,
    known: Option<bool>,
) -> Result<Option<(u128, bool)>, LeaderError> {
    let settings = ctx.settings();
    let Some(min_balance) = settings.min_balance else {
        return Ok(None);
    };
    let balance = ctx.chain.balance(ctx.key.address).await?;
    let balance = u128::try_from(balance).unwrap_or(u128::MAX);
    let low = balance < min_balance;
    let labels = [
        ("chain", crate::metrics::chain_label(ctx.key.chain_id)),
        ("submitter", ctx.key.address_hex()),
    ];
    metrics::gauge!(SUBMITTER_BALANCE, &labels).set(balance as f64);
    metrics::gauge!(crate::metrics::SUBMITTER_MIN_BALANCE, &labels).set(min_balance as f64);
    // While low with a top-up configured, each check looks whether the
    // crossing's top-up failed (and must be sent again).
    let watch_top_up = low && settings.top_up.is_some();
    if known == Some(low) && !watch_top_up {
        return Ok(Some((balance, low)));
    }

    let mut ftx = FencedTx::begin(&ctx.pool, lease, "funds").await?;
    let stored = funds::lock_state(&mut ftx).await?;
    let event = match stored {
        Some(state) if state.low == low => None,
        // The first check assumes the balance was sufficient before.
        None if !low => None,
        _ if low => Some(FeedEvent::LowBalance),
        _ => Some(FeedEvent::BalanceRestored),
    };
    if let (Some(state), None) = (stored, event) {
        let retried = match settings.top_up {
            Some(top_up) if low => {
                retry_failed_top_up(ctx, &mut ftx, &top_up, balance, state.crossings).await?
            }
            _ => false,
        };
        if retried {
            metrics::counter!(FUNDS_EVENTS, "chain" => crate::metrics::chain_label(ctx.key.chain_id), "event" => "top_up_failed").increment(1);
            ftx.commit().await?;
        } else {
            ftx.rollback().await?;
        }
        return Ok(Some((balance, low)));
    }
    let crossings =
        stored.map_or(0, |s| s.crossings) + i64::from(event == Some(FeedEvent::LowBalance));
    funds::save(
        &mut ftx,
        FundsState { low, crossings },
        balance,
        min_balance,
        event,
    )
    .await?;
    let top_up = match (event, settings.top_up) {
        (Some(FeedEvent::LowBalance), Some(top_up)) => {
            Some(queue_top_up(ctx, &mut ftx, &top_up, balance, crossings, 0).await?)
        }
        _ => None,
    };
    ftx.commit().await?;
    if event.is_some() {
        let label = if low {
            "low_balance"
        } else {
            "balance_restored"
        };
        metrics::counter!(FUNDS_EVENTS, "chain" => crate::metrics::chain_label(ctx.key.chain_id), "event" => label).increment(1);
        if low {
            tracing::warn!(target: "txmgr::funds", submitter = %ctx.key, balance, min_balance, crossing = crossings, "balance below min_balance");
        } else {
            tracing::info!(target: "txmgr::funds", submitter = %ctx.key, balance, min_balance, "balance restored");
        }
    }
    if let Some(outcome) = top_up {
        metrics::counter!(TOP_UPS, "chain" => crate::metrics::chain_label(ctx.key.chain_id), "result" => outcome.label()).increment(1);
    }
    Ok(Some((balance, low)))
}

/// Still low: when the crossing's latest top-up ended without funding
/// (REJECTED, FAILED_FINAL, CANCELLED), queues another one for the same
/// crossing (a new request id, same cap). True when one was queued.
async fn retry_failed_top_up(
    ctx: &SubmitterContext,
    ftx: &mut FencedTx,
    top_up: &TopUp,
    balance: u128,
    crossing: i64,
) -> Result<bool, LeaderError> {
    let prefix = top_up_request_id(&ctx.key, crossing, 0);
    let so_far = funds::crossing_top_ups(ftx, &prefix).await?;
    if !so_far
        .latest_state
        .as_deref()
        .is_some_and(|state| FAILED_TOP_UP.contains(&state))
    {
        return Ok(false);
    }
    // Not yet: the failed ones of this crossing back off exponentially.
    if so_far.latest_age_secs < retry_backoff(so_far.sent).as_secs_f64() {
        return Ok(false);
    }
    // Capped: nothing now, and no audit row per check; the next check
    // (or the next crossing) tries again.
    let funder = format!("{:#x}", top_up.from);
    let amount = top_up_amount(
        balance,
        top_up,
        funds::topped_up_last_day(ftx).await?,
        funds::funded_last_day(ftx, &funder).await?,
    );
    if amount == 0 {
        return Ok(false);
    }
    tracing::warn!(target: "txmgr::funds", submitter = %ctx.key, crossing, state = ?so_far.latest_state, "the top-up failed; sending another");
    let outcome = queue_top_up(ctx, ftx, top_up, balance, crossing, so_far.sent).await?;
    metrics::counter!(TOP_UPS, "chain" => crate::metrics::chain_label(ctx.key.chain_id), "result" => outcome.label()).increment(1);
    Ok(outcome == TopUpOutcome::Sent)
}

/// What a crossing's top-up came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TopUpOutcome {
    /// The funder's intent was queued.
    Sent,
    /// The daily cap left nothing to send.
    Capped,
    /// No request id of the crossing was free (see [`MAX_TOP_UP_IDS`]).
    NotSent,
}

impl TopUpOutcome {
    /// `txmgr_top_ups_total{result}`.
    fn label(self) -> &'static str {
        match self {
            TopUpOutcome::Sent => "sent",
            TopUpOutcome::Capped => "capped",
            TopUpOutcome::NotSent => "failed",
        }
    }
}

/// Request ids of one crossing tried before its top-up is given up: each id
/// that is already held (by an intent txmgr did not make for this top-up)
/// moves on to the next.
const MAX_TOP_UP_IDS: i64 = 64;

/// Queues the top-up of this crossing (its `retry`-th after failed ones),
/// or records that the cap left nothing to send. A request id that is held
/// already is never taken for a replay: the next one of the crossing is
/// tried, so a top-up cannot be suppressed by an intent that only wears its
/// name.
async fn queue_top_up(
    ctx: &SubmitterContext,
    ftx: &mut FencedTx,
    top_up: &TopUp,
    balance: u128,
    crossing: i64,
    retry: i64,
) -> Result<TopUpOutcome, LeaderError> {
    let sent_today = funds::topped_up_last_day(ftx).await?;
    let funder_sent = funds::funded_last_day(ftx, &format!("{:#x}", top_up.from)).await?;
    let amount = top_up_amount(balance, top_up, sent_today, funder_sent);
    if amount == 0 {
        let reason = match top_up.funder_max_per_day {
            Some(cap) if funder_sent >= cap => format!(
                "top-up not sent: the funder sent {funder_sent} wei in top-ups in the last 24 h, reaching its funding_max_per_day {cap}"
            ),
            _ => format!(
                "top-up not sent: {sent_today} wei sent in the last 24 h reaches max_per_day {}",
                top_up.max_per_day
            ),
        };
        tracing::warn!(target: "txmgr::funds", submitter = %ctx.key, "{reason}");
        funds::record_capped(ftx, &reason, &ctx.owner.node_id).await?;
        return Ok(TopUpOutcome::Capped);
    }
    let funder = SubmitterKey::new(ctx.key.chain_id, top_up.from);
    for retry in retry..retry + MAX_TOP_UP_IDS {
        let request_id = top_up_request_id(&ctx.key, crossing, retry);
        let intent = NewIntent::new(
            funder,
            Some(request_id.clone()),
            Intent::transfer(ctx.key.address, U256::from(amount)),
        );
        match funds::queue_top_up(ftx, &intent, amount, &ctx.owner.node_id).await? {
            TopUpQueued::Queued(tx_id) => {
                tracing::info!(target: "txmgr::funds", submitter = %ctx.key, funder = %funder, amount, %tx_id, request_id, "top-up queued");
                return Ok(TopUpOutcome::Sent);
            }
            TopUpQueued::AlreadyQueued | TopUpQueued::Taken => {
                tracing::error!(target: "txmgr::funds", submitter = %ctx.key, funder = %funder, request_id,
                    "a top-up's request id is held already; trying the next one");
            }
        }
    }
    let reason = format!(
        "top-up not sent: {MAX_TOP_UP_IDS} request ids of crossing {crossing} are held by other intents"
    );
    tracing::error!(target: "txmgr::funds", submitter = %ctx.key, "{reason}");
    funds::record_capped(ftx, &reason, &ctx.owner.node_id).await?;
    Ok(TopUpOutcome::NotSent)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_top_up_aims_for_the_target_within_the_daily_cap() {
        let top_up = TopUp {
            from: alloy::primitives::Address::ZERO,
            target: 100,
            max_per_day: 150,
            funder_max_per_day: None,
        };
        assert_eq!(top_up_amount(30, &top_up, 0, 0), 70);
        assert_eq!(top_up_amount(30, &top_up, 100, 0), 50, "the cap's rest");
        assert_eq!(top_up_amount(30, &top_up, 150, 0), 0, "cap reached");
        assert_eq!(top_up_amount(120, &top_up, 0, 0), 0, "above target");
        let bounded = TopUp {
            funder_max_per_day: Some(500),
            ..top_up
        };
        assert_eq!(top_up_amount(30, &bounded, 0, 480), 20, "the funder's rest");
        assert_eq!(
            top_up_amount(30, &bounded, 0, 500),
            0,
            "funder's bound reached"
        );
        assert_eq!(top_up_amount(30, &bounded, 0, 1_000), 0);
    }

    #[test]
    fn failed_top_ups_of_a_crossing_back_off_exponentially_up_to_an_hour() {
        assert_eq!(retry_backoff(1), RETRY_BACKOFF);
        assert_eq!(retry_backoff(2), RETRY_BACKOFF * 2);
        assert_eq!(retry_backoff(4), RETRY_BACKOFF * 8);
        assert_eq!(retry_backoff(30), MAX_RETRY_BACKOFF);
        assert_eq!(retry_backoff(i64::MAX), MAX_RETRY_BACKOFF);
    }

    #[test]
    fn the_request_id_names_the_submitter_and_the_crossing() {
        let key = SubmitterKey::new(1u64, alloy::primitives::Address::repeat_byte(0xab));
        assert_eq!(
            top_up_request_id(&key, 3, 0),
            "txmgr-top-up:0xabababababababababababababababababababab:3"
        );
        assert_eq!(
            top_up_request_id(&key, 3, 2),
            "txmgr-top-up:0xabababababababababababababababababababab:3:2"
        );
        // Clients may not create an intent under it (the edge refuses the
        // engine's prefixes).
        assert!(crate::domain::engine_request_id_prefix(&top_up_request_id(&key, 3, 0)).is_some());
    }
}
