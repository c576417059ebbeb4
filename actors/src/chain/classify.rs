//! Classifying a node's answer to `eth_sendRawTransaction` (README "How an
//! intent is executed").
//!
//! Nodes answer with free text, and the JSON-RPC code does not help much:
//! geth, erigon and nitro use -32000 for nearly everything, while -32002,
//! -32003, -32005 and -32603 mean different things on different nodes. So the
//! classifier matches the lower-cased message against an ordered table of
//! fragments (`classify_rules`) and uses the code only as a last resort.
//!
//! Unknown text is [`BroadcastClass::Transient`]: re-broadcasting the identical
//! bytes is always safe, whereas a wrong definitive refusal would release a
//! nonce whose transaction may still be mined.
//!
//! The test vectors are `shared/data/rpc-errors.json` (committed copy in
//! `actors/tests/data/`), checked by `actors/tests/classify_vectors.rs`.

/// What a node's answer to `eth_sendRawTransaction` means for us.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BroadcastClass {
    /// The node returned a hash. Never produced from an error; callers use it
    /// so that every broadcast outcome has one class (and one metric label).
    Accepted,
    /// The node already holds these exact bytes: an earlier broadcast (ours,
    /// possibly through another node) got there first. Treat as accepted.
    AlreadyKnown,
    /// The nonce is consumed on chain: find which of our attempts mined, else
    /// it was external use of the key (README "Data model and leases", PROTECT).
    NonceTooLow,
    /// The node refuses a gapped nonce (most pools queue instead). Retry later,
    /// like a transient error.
    NonceTooHigh,
    /// The pool holds a pricier transaction for this nonce: bump if allowed,
    /// else keep tracking.
    ReplacementUnderpriced,
    /// Below the pool's minimum price or too cheap to compete: bump if allowed,
    /// else retry.
    Underpriced,
    /// The sender cannot pay now: keep the nonce, retry with backoff, alert.
    InsufficientFunds,
    /// Max fee below the current base fee, on nodes that refuse such a
    /// transaction instead of parking it: retry or bump.
    FeeCapTooLow,
    /// The node's `rpc.txfeecap` refuses the fee: definitive for these bytes.
    TxFeeExceedsCap,
    /// The node will never accept these bytes, whatever the timing.
    Invalid(InvalidReason),
    /// The pool (or this sender's share of it) is full: retry later.
    PoolFull,
    /// Timeouts, connection errors, 5xx, rate limits and unknown text: retry
    /// the identical bytes, never re-sign with another nonce.
    Transient,
}

/// Why a node definitively refused a transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum InvalidReason {
    /// Gas limit below the intrinsic (or EIP-7623 floor) gas of the transaction.
    IntrinsicGas,
    /// Gas limit above the block gas limit or the per-transaction cap.
    GasLimit,
    /// Max priority fee above max fee: the fee fields contradict each other.
    TipAboveFeeCap,
    /// The signature does not recover to a usable sender.
    InvalidSignature,
    /// Signed for another chain, or without EIP-155 replay protection.
    ChainId,
    /// The transaction type is not enabled on this chain or fork.
    TxType,
    /// The encoded transaction or its initcode is larger than allowed.
    Oversized,
    /// Execution reverted (nodes that simulate before admission).
    Reverted,
}

impl InvalidReason {
    /// Stable snake_case name, for metrics labels and logs.
    pub fn label(&self) -> &'static str {
        match self {
            InvalidReason::IntrinsicGas => "intrinsic_gas",
            InvalidReason::GasLimit => "gas_limit",
            InvalidReason::TipAboveFeeCap => "tip_above_fee_cap",
            InvalidReason::InvalidSignature => "invalid_signature",
            InvalidReason::ChainId => "chain_id",
            InvalidReason::TxType => "tx_type",
            InvalidReason::Oversized => "oversized",
            InvalidReason::Reverted => "reverted",
        }
    }
}

impl BroadcastClass {
    /// True when these bytes will never be accepted: the intent may become
    /// REJECTED (and its nonce released if no attempt was ever accepted).
    pub fn is_definitive_refusal(&self) -> bool {
        match self {
            // The node's fee cap will refuse the same bytes every time.
            BroadcastClass::TxFeeExceedsCap => true,
            // Malformed, mis-signed or unexecutable: no retry can fix the bytes.
            BroadcastClass::Invalid(_) => true,
            // The nonce is used, but possibly by one of our own attempts; the
            // caller must look before releasing anything.
            BroadcastClass::NonceTooLow => false,
            // Fixed by time, money or a fee bump, not by giving up.
            BroadcastClass::NonceTooHigh
            | BroadcastClass::ReplacementUnderpriced
            | BroadcastClass::Underpriced
            | BroadcastClass::InsufficientFunds
            | BroadcastClass::FeeCapTooLow
            | BroadcastClass::PoolFull
            | BroadcastClass::Transient => false,
            // Not refusals at all.
            BroadcastClass::Accepted | BroadcastClass::AlreadyKnown => false,
        }
    }

    /// True when a node holds the transaction, so the intent moves to TRACKING.
    pub fn counts_as_accepted(&self) -> bool {
        matches!(
            self,
            BroadcastClass::Accepted | BroadcastClass::AlreadyKnown
        )
    }

    /// Stable snake_case name, for metrics labels and logs. Every
    /// [`BroadcastClass::Invalid`] is `invalid`; [`InvalidReason::label`] gives
    /// the detail without multiplying this label's values.
    pub fn label(&self) -> &'static str {
        match self {
            BroadcastClass::Accepted => "accepted",
            BroadcastClass::AlreadyKnown => "already_known",
            BroadcastClass::NonceTooLow => "nonce_too_low",
            BroadcastClass::NonceTooHigh => "nonce_too_high",
            BroadcastClass::ReplacementUnderpriced => "replacement_underpriced",
            BroadcastClass::Underpriced => "underpriced",
            BroadcastClass::InsufficientFunds => "insufficient_funds",
            BroadcastClass::FeeCapTooLow => "fee_cap_too_low",
            BroadcastClass::TxFeeExceedsCap => "tx_fee_exceeds_cap",
            BroadcastClass::Invalid(_) => "invalid",
            BroadcastClass::PoolFull => "pool_full",
            BroadcastClass::Transient => "transient",
        }
    }
}

use super::classify_rules::RULES;
use BroadcastClass as C;

/// The class of a broadcast's outcome: accepted, the node's error
/// classified by its text, or transient when no answer came (whether the
/// send reached the node is unknown).
pub fn classify_send<T>(result: &Result<T, super::ChainError>) -> BroadcastClass {
    match result {
        Ok(_) => C::Accepted,
        Err(super::ChainError::Rpc { code, message }) => classify_rpc_error(Some(*code), message),
        Err(super::ChainError::Transport(_)) => C::Transient,
    }
}

/// JSON-RPC code for "execution reverted" on geth, reth, anvil, nethermind
/// and besu, with the revert data in `error.data`.
const CODE_EXECUTION_REVERTED: i64 = 3;

/// Classifies a node's error answer to `eth_sendRawTransaction`.
///
/// `code` is the JSON-RPC `error.code` if there was one (`None` for transport
/// errors). The message decides; the code is only consulted when no fragment
/// matched, because the same code means different things on different nodes.
pub fn classify_rpc_error(code: Option<i64>, message: &str) -> BroadcastClass {
    let text = message.to_lowercase();
    if let Some(&(_, class)) = RULES
        .iter()
        .find(|(needle, _)| contains_at_word_start(&text, needle))
    {
        return class;
    }
    match code {
        // Every node that uses 3 uses it for reverts only.
        Some(CODE_EXECUTION_REVERTED) => C::Invalid(InvalidReason::Reverted),
        // -32603, -32005, -32000, 429 ...: shared between unrelated meanings.
        _ => C::Transient,
    }
}

/// True when `needle` occurs in `haystack` not preceded by a letter or digit.
fn contains_at_word_start(haystack: &str, needle: &str) -> bool {
    haystack.match_indices(needle).any(|(at, _)| {
        haystack[..at]
            .chars()
            .next_back()
            .is_none_or(|c| !c.is_alphanumeric())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use InvalidReason as R;

    /// (code, message, expected): the traps, each with why it is a trap.
    #[rustfmt::skip]
    const TRAPS: &[(Option<i64>, &str, BroadcastClass)] = &[
        // "transaction underpriced" is a suffix of the replacement message.
        (Some(-32000), "replacement transaction underpriced", C::ReplacementUnderpriced),
        (Some(-32000), "FEE_TOO_LOW: replacement transaction underpriced", C::ReplacementUnderpriced),
        (Some(-32000), "Replacement transaction underpriced", C::ReplacementUnderpriced),
        (Some(-32000), "transaction underpriced", C::Underpriced),
        (Some(-32000), "FEE_TOO_LOW: underpriced", C::Underpriced),
        // "known transaction" must not match inside "unknown transaction".
        (Some(-32000), "Known transaction", C::AlreadyKnown),
        (None, "unknown transaction", C::Transient),
        (Some(-32003), "Unknown transaction type not supported", C::Invalid(R::TxType)),
        // -32005 is besu's block gas limit refusal and infura's rate limit.
        (Some(-32005), "Transaction gas limit exceeds block gas limit", C::Invalid(R::GasLimit)),
        (Some(-32005), "project ID request rate exceeded", C::Transient),
        // "limit exceeded" rows come after the specific ones.
        (Some(-32000), "account limit exceeded: pooled 16 txs", C::PoolFull),
        (Some(-32005), "Transaction gas limit cap exceeded", C::Invalid(R::GasLimit)),
        // Besu's -32603 catch-all names no reason: not definitive.
        (Some(-32603), "Internal error", C::Transient),
        // Code 3 decides only when the text says nothing.
        (Some(3), "0x08c379a0", C::Invalid(R::Reverted)),
        (Some(3), "nonce too low", C::NonceTooLow),
        // Status prefixes and wrappers around the reason.
        (Some(-32000), "ALREADY_EXISTS: already known", C::AlreadyKnown),
        (Some(-32000), "INTERNAL_ERROR: nonce too low", C::NonceTooLow),
        (None, "rpc error: code = Unknown desc = replacement transaction underpriced", C::ReplacementUnderpriced),
        (None, "failed to forward tx to sequencer, please try again. Error message: 'nonce too low'", C::NonceTooLow),
        (Some(-32000), "transaction invalid, InvalidTxChainId: Expected 1, got 5.", C::Invalid(R::ChainId)),
        // A wrong chain arrives as "invalid sender: ..." on geth.
        (Some(-32000), "invalid sender: invalid chain id for signer: have 5 want 1", C::Invalid(R::ChainId)),
        (Some(-32000), "invalid sender", C::Invalid(R::InvalidSignature)),
        // Nethermind's "FeeTooLow" prefix covers the base fee and the pool minimum.
        (Some(-32010), "FeeTooLow, MaxFeePerGas too low. MaxFeePerGas: 50, BaseFee: 100", C::FeeCapTooLow),
        (Some(-32010), "FeeTooLow, FeePerGas needs to be higher than 100 to be added to the TxPool.", C::Underpriced),
        // Besu's intrinsic gas vs the transaction's own limit; reth's "too high".
        (Some(-32003), "Intrinsic gas exceeds gas limit", C::Invalid(R::IntrinsicGas)),
        (Some(-32000), "intrinsic gas too high", C::Invalid(R::GasLimit)),
        // Unknown text, including an estimateGas-only answer, stays transient.
        (Some(-32000), "", C::Transient),
        (Some(-32000), "INTERNAL_ERROR: something new", C::Transient),
        (Some(-32000), "gas required exceeds allowance (30000000)", C::Transient),
    ];

    #[test]
    fn traps_classify_as_intended() {
        let wrong: Vec<String> = TRAPS
            .iter()
            .filter_map(|&(code, msg, want)| {
                let got = classify_rpc_error(code, msg);
                (got != want).then(|| format!("{msg:?}: expected {want:?}, got {got:?}"))
            })
            .collect();
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }

    #[test]
    fn predicates_and_labels() {
        assert!(C::AlreadyKnown.counts_as_accepted());
        assert!(!C::NonceTooLow.counts_as_accepted());
        assert!(C::TxFeeExceedsCap.is_definitive_refusal());
        assert!(C::Invalid(R::Oversized).is_definitive_refusal());
        assert!(!C::NonceTooLow.is_definitive_refusal());
        assert!(!C::Transient.is_definitive_refusal());
        assert_eq!(C::Invalid(R::ChainId).label(), "invalid");
        assert_eq!(C::FeeCapTooLow.label(), "fee_cap_too_low");
        assert_eq!(R::TipAboveFeeCap.label(), "tip_above_fee_cap");
    }
}
