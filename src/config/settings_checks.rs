//! Checks of one submitter's resolved settings (`[defaults]` and each
//! `[submitters."0x…"]` after the merge): ranges and relations between its
//! keys. Keys are named relative to the settings table.

use txmgr_actors::{
    domain::Finality,
    submitter::{
        settings::{MAX_BATCH_SIZE, MIN_BUMP_MULTIPLIER},
        SubmitterSettings,
    },
};

/// Checks resolved settings; returns `(field path, reason)` pairs relative
/// to the settings table.
pub(crate) fn check_settings(s: &SubmitterSettings) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    if s.max_in_flight == 0 {
        out.push(("max_in_flight", "must be >= 1".to_string()));
    }
    // A spend window is not bounded by `feed.retain`: the ledger keeps its
    // rows for the longest window any node runs (`daemon::ledger_retention`).
    out.extend(s.policy.issues());
    if !(1..=MAX_BATCH_SIZE).contains(&s.batch_size) {
        out.push((
            "batch_size",
            format!("must be between 1 and {MAX_BATCH_SIZE}"),
        ));
    }
    if s.ingress_capacity == 0 {
        out.push(("ingress_capacity", "must be >= 1".to_string()));
    }
    if s.finality == Finality::Confirmations(0) {
        out.push(("finality", "confirmations must be >= 1".to_string()));
    }
    for (field, d) in [
        ("resubmit_interval", s.resubmit_interval),
        ("stuck_after", s.stuck_after),
        ("reject_after", s.reject_after),
    ] {
        if d.is_zero() {
            out.push((field, "must be greater than zero".to_string()));
        }
    }
    if !s.gas_limit_margin.is_finite() || s.gas_limit_margin < 1.0 {
        out.push(("gas_limit_margin", "must be a number >= 1.0".to_string()));
    }
    for (field, cap) in [
        ("max_fee_per_gas_cap", s.max_fee_per_gas_cap),
        (
            "max_priority_fee_per_gas_cap",
            s.max_priority_fee_per_gas_cap,
        ),
        ("gas_price_cap", s.gas_price_cap),
    ] {
        if cap == Some(0) {
            out.push((field, "must be > 0 (omit the key for no cap)".to_string()));
        }
    }
    if let (Some(prio), Some(max)) = (s.max_priority_fee_per_gas_cap, s.max_fee_per_gas_cap) {
        if prio > max {
            out.push((
                "max_priority_fee_per_gas_cap",
                format!("{prio} exceeds max_fee_per_gas_cap {max}"),
            ));
        }
    }
    if let Some(top_up) = &s.top_up {
        match s.min_balance {
            None => out.push((
                "top_up",
                "needs min_balance: a top-up starts when the balance falls below it".to_string(),
            )),
            Some(min) if top_up.target <= min => out.push((
                "top_up.target",
                format!("{} must be above min_balance {min}", top_up.target),
            )),
            Some(_) => {}
        }
        if top_up.max_per_day == 0 {
            out.push(("top_up.max_per_day", "must be > 0".to_string()));
        }
    }
    if s.funding_max_per_day == Some(0) {
        out.push((
            "funding_max_per_day",
            "must be > 0 (leave it out for no funder-wide bound)".to_string(),
        ));
    }
    let m = s.gas_bump.multiplier;
    if !m.is_finite() || m < 1.0 {
        out.push(("gas_bump.multiplier", "must be a number >= 1.0".to_string()));
    } else if s.gas_bump.enabled && m < MIN_BUMP_MULTIPLIER {
        out.push((
            "gas_bump.multiplier",
            format!(
                "must be >= {MIN_BUMP_MULTIPLIER} when gas_bump.enabled (nodes refuse smaller \
                 replacements)"
            ),
        ));
    }
    out
}
