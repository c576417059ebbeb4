//! Combining the answers of several endpoints to one `eth_sendRawTransaction`.
//!
//! The same signed bytes go to every healthy endpoint, so the combined answer
//! must never be more final than the facts allow:
//! - one endpoint accepted (a hash, or "already known") → accepted;
//! - else any unknown answer (timeout, connection error, unclassifiable
//!   text) → unknown: the bytes may sit in that backend's pool, so nothing
//!   may be released on the others' refusals;
//! - else every endpoint refused → the least final refusal wins, so a
//!   definitive refusal (which releases the nonce) is only reported when
//!   every endpoint gave one.

use alloy::primitives::B256;

use super::{classify_send, BroadcastClass, ChainError};

/// How final a refusal is: lower ranks win when endpoints disagree.
fn finality_rank(class: BroadcastClass) -> u8 {
    match class {
        BroadcastClass::Accepted | BroadcastClass::AlreadyKnown => 0,
        BroadcastClass::Transient => 1,
        // The nonce is used: the submitter looks for which attempt mined.
        BroadcastClass::NonceTooLow => 2,
        BroadcastClass::ReplacementUnderpriced => 3,
        BroadcastClass::Underpriced => 4,
        BroadcastClass::FeeCapTooLow => 5,
        BroadcastClass::NonceTooHigh => 6,
        BroadcastClass::PoolFull => 7,
        BroadcastClass::InsufficientFunds => 8,
        BroadcastClass::TxFeeExceedsCap => 9,
        BroadcastClass::Invalid(_) => 10,
    }
}

/// The combined answer of all endpoints (see the module docs). `answers`
/// must not be empty.
pub(crate) fn combine(answers: Vec<Result<B256, ChainError>>) -> Result<B256, ChainError> {
    let mut unknown = Vec::new();
    let mut best: Option<(u8, ChainError)> = None;
    for answer in answers {
        let class = classify_send(&answer);
        match answer {
            Ok(hash) => return Ok(hash),
            Err(err @ ChainError::Transport(_)) => unknown.push(err.to_string()),
            Err(err) => {
                let rank = finality_rank(class);
                if rank == 0 {
                    return Err(err);
                }
                if best.as_ref().is_none_or(|(r, _)| rank < *r) {
                    best = Some((rank, err));
                }
            }
        }
    }
    if !unknown.is_empty() && best.as_ref().is_none_or(|(rank, _)| *rank > 1) {
        return Err(ChainError::Transport(unknown.join("; ")));
    }
    match best {
        Some((_, err)) => Err(err),
        None => Err(ChainError::Transport("no endpoint to send to".to_owned())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rpc(message: &str) -> Result<B256, ChainError> {
        Err(ChainError::Rpc {
            code: -32000,
            message: message.to_owned(),
        })
    }

    fn transport() -> Result<B256, ChainError> {
        Err(ChainError::Transport("endpoint b: timed out".to_owned()))
    }

    #[test]
    fn one_acceptance_is_acceptance() {
        let hash = B256::repeat_byte(7);
        let out = combine(vec![rpc("nonce too low"), Ok(hash), transport()]);
        assert_eq!(out.expect("accepted"), hash);
        let known = combine(vec![
            rpc("insufficient funds for gas"),
            rpc("already known"),
        ]);
        assert_eq!(classify_send(&known), BroadcastClass::AlreadyKnown);
    }

    #[test]
    fn an_unknown_answer_outweighs_every_refusal() {
        let out = combine(vec![rpc("intrinsic gas too low"), transport()]);
        assert_eq!(classify_send(&out), BroadcastClass::Transient);
        let text = combine(vec![rpc("exceeds block gas limit"), rpc("something new")]);
        assert_eq!(classify_send(&text), BroadcastClass::Transient);
    }

    #[test]
    fn a_definitive_refusal_needs_every_endpoint() {
        let out = combine(vec![
            rpc("intrinsic gas too low"),
            rpc("replacement transaction underpriced"),
        ]);
        assert_eq!(classify_send(&out), BroadcastClass::ReplacementUnderpriced);
        let all = combine(vec![
            rpc("intrinsic gas too low"),
            rpc("intrinsic gas too low"),
        ]);
        assert!(classify_send(&all).is_definitive_refusal());
    }

    #[test]
    fn nonce_too_low_from_one_endpoint_is_reported() {
        let out = combine(vec![
            rpc("insufficient funds for gas * price + value"),
            rpc("nonce too low"),
        ]);
        assert_eq!(classify_send(&out), BroadcastClass::NonceTooLow);
    }
}
