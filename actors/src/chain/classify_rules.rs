//! The classifier's table: lower-case fragments of the nodes' refusal texts
//! (geth, reth, anvil, erigon, nethermind, besu, L2s) and the class each
//! means, in the order they are checked.

use super::classify::{BroadcastClass, InvalidReason};

use BroadcastClass as C;
use InvalidReason as R;

/// Lower-case fragments and what they mean, checked in order; the first hit
/// wins. A fragment only matches at the start of a word, so `known transaction`
/// does not match inside `unknown transaction`. Client prefixes (erigon
/// `ALREADY_EXISTS: `, nethermind `transaction invalid, `, gRPC `rpc error:
/// code = ... desc = `) need no stripping: fragments are found anywhere.
#[rustfmt::skip] // one rule per line keeps the order readable as a table
pub(super) const RULES: &[(&str, BroadcastClass)] = &[
    // Before `Underpriced`: "transaction underpriced" is a suffix of this.
    ("replacement transaction underpriced", C::ReplacementUnderpriced),
    ("another transaction with same nonce in the queue", C::ReplacementUnderpriced), // parity
    ("has the same nonce in the tx pool", C::ReplacementUnderpriced), // klaytn
    // Exact bytes already pooled. "ownnoncealreadyused" (older nethermind)
    // means a tx at this nonce sent through this node's RPC, i.e. one of our
    // attempts; any of them may be the one mined, so it is ours to track.
    ("already known", C::AlreadyKnown),
    ("known transaction", C::AlreadyKnown), // besu, old geth; not "unknown ..."
    ("already imported", C::AlreadyKnown),  // anvil, parity
    ("alreadyknown", C::AlreadyKnown),
    ("ownnoncealreadyused", C::AlreadyKnown),
    ("already exists in cache", C::AlreadyKnown), // sei
    ("nonce too low", C::NonceTooLow),
    ("nonce is too low", C::NonceTooLow),
    ("oldnonce", C::NonceTooLow),
    // Arbitrum classic says this for low and high nonces alike; low is the one
    // needing action, and its handler reads the chain's nonce before acting.
    ("invalid transaction nonce", C::NonceTooLow),
    ("nonce too high", C::NonceTooHigh),
    ("nonce is too high", C::NonceTooHigh),
    ("gapped-nonce", C::NonceTooHigh),
    ("noncegap", C::NonceTooHigh),
    ("nonce too far in", C::NonceTooHigh),
    ("nonce is too distant", C::NonceTooHigh), // besu
    ("exceeds next nonce", C::NonceTooHigh),
    ("nonce out of range", C::NonceTooHigh),
    // Before the base-fee rows, which also talk about "max fee per gas".
    ("max priority fee per gas higher than max fee", C::Invalid(R::TipAboveFeeCap)),
    ("max priority fee per gas exceeds max fee", C::Invalid(R::TipAboveFeeCap)), // besu
    ("max_priority_fee_per_gas` greater than", C::Invalid(R::TipAboveFeeCap)), // anvil
    ("invalidmaxpriorityfeepergas", C::Invalid(R::TipAboveFeeCap)), // nethermind
    // hardhat: "maxPriorityFeePerGas (3) is bigger than maxFeePerGas (2)".
    ("is bigger than maxfeepergas", C::Invalid(R::TipAboveFeeCap)),
    // klaytn words it the other way round for the same check.
    ("max fee per gas higher than max priority fee", C::Invalid(R::TipAboveFeeCap)),
    // Before `Underpriced`: nethermind says "FeeTooLow, MaxFeePerGas too low"
    // here, sharing the prefix with its pool-minimum refusal.
    ("less than block base fee", C::FeeCapTooLow),
    ("below current base fee", C::FeeCapTooLow), // besu
    ("maxfeepergas too low", C::FeeCapTooLow),
    ("too low for the next block", C::FeeCapTooLow), // hardhat
    ("exceeds the configured cap", C::TxFeeExceedsCap),
    ("transaction fee cap exceeded", C::TxFeeExceedsCap), // besu
    // klaytn: probably a malformed fee field rather than `rpc.txfeecap`, but
    // just as definitive for these bytes.
    ("invalid gas fee cap", C::TxFeeExceedsCap),
    ("underpriced", C::Underpriced),
    ("below minimum", C::Underpriced),
    ("below configured minimum", C::Underpriced), // besu
    ("below the minimum", C::Underpriced),        // hardhat
    ("fee too low", C::Underpriced),              // erigon "FEE_TOO_LOW: fee too low"
    ("feetoolow", C::Underpriced),                // nethermind, also "FeeTooLowToCompete"
    ("gas price is too low", C::Underpriced),     // parity
    ("gas price too low", C::Underpriced),
    ("insufficient funds", C::InsufficientFunds),
    ("insufficientfunds", C::InsufficientFunds),
    ("insufficient balance", C::InsufficientFunds),
    ("upfront cost exceeds account balance", C::InsufficientFunds), // besu
    ("enough funds", C::InsufficientFunds), // hardhat "doesn't have enough funds"
    // Before the gas-limit rows: besu's "Intrinsic gas exceeds gas limit" is
    // about the transaction's own gas limit, not the block's.
    ("intrinsic gas too low", C::Invalid(R::IntrinsicGas)),
    ("intrinsicgas", C::Invalid(R::IntrinsicGas)), // erigon, nethermind enum names
    ("intrinsic gas exceeds gas limit", C::Invalid(R::IntrinsicGas)),
    ("floor data gas", C::Invalid(R::IntrinsicGas)), // EIP-7623
    // hardhat: "Transaction requires at least 21000 gas but got 20000".
    ("gas but got", C::Invalid(R::IntrinsicGas)),
    ("exceeds block gas limit", C::Invalid(R::GasLimit)),
    ("gas limit too high", C::Invalid(R::GasLimit)),
    ("gas limit is too high", C::Invalid(R::GasLimit)),
    ("exceeds max transaction gas limit", C::Invalid(R::GasLimit)),
    ("exceeds transaction gas cap", C::Invalid(R::GasLimit)), // hardhat, EIP-7825
    ("exceeds maximum per-transaction gas limit", C::Invalid(R::GasLimit)),
    ("intrinsic gas too high", C::Invalid(R::GasLimit)), // reth/anvil: above the block's
    ("gas limit cap exceeded", C::Invalid(R::GasLimit)),
    ("gas limit reached", C::Invalid(R::GasLimit)),
    ("gaslimitexceeded", C::Invalid(R::GasLimit)),
    // Before the transient rows: "account limit exceeded" is not a provider's
    // "limit exceeded".
    ("txpool is full", C::PoolFull),
    ("sub-pool is full", C::PoolFull), // erigon
    ("pool full", C::PoolFull),
    ("queue full", C::PoolFull),
    ("account limit exceeded", C::PoolFull),
    ("in-flight transaction limit reached", C::PoolFull),
    ("too many transactions in the queue", C::PoolFull), // parity
    // Before the signature rows: geth reports a wrong chain as
    // "invalid sender: invalid chain id for signer".
    ("invalid chain id", C::Invalid(R::ChainId)),
    ("invalid chainid", C::Invalid(R::ChainId)),
    ("wrong chainid", C::Invalid(R::ChainId)),
    ("chainid is required", C::Invalid(R::ChainId)),
    ("invalidtxchainid", C::Invalid(R::ChainId)),
    ("replay-protected", C::Invalid(R::ChainId)),
    ("signed for another chain", C::Invalid(R::ChainId)),
    ("invalid sender", C::Invalid(R::InvalidSignature)),
    ("invalid transaction signature", C::Invalid(R::InvalidSignature)),
    ("invalid signature", C::Invalid(R::InvalidSignature)),
    ("invalid v, r, s", C::Invalid(R::InvalidSignature)),
    ("failed to recover sender", C::Invalid(R::InvalidSignature)),
    ("invalidtxsignature", C::Invalid(R::InvalidSignature)),
    ("failedtoresolvesender", C::Invalid(R::InvalidSignature)),
    ("transaction type not supported", C::Invalid(R::TxType)),
    ("unsupported transaction type", C::Invalid(R::TxType)),
    ("invalid transaction type", C::Invalid(R::TxType)),
    ("invalidtxtype", C::Invalid(R::TxType)),
    ("not supported by the current hardfork", C::Invalid(R::TxType)), // anvil
    ("fork supporting this transaction type", C::Invalid(R::TxType)), // erigon
    ("oversized data", C::Invalid(R::Oversized)),
    ("initcode size exceeded", C::Invalid(R::Oversized)),
    ("initcode too large", C::Invalid(R::Oversized)),
    ("rlptoolong", C::Invalid(R::Oversized)),
    ("transaction too large", C::Invalid(R::Oversized)),
    ("execution reverted", C::Invalid(R::Reverted)),
    ("vm execution error", C::Invalid(R::Reverted)), // parity
    // Unknown text is transient anyway; these rows name known transient
    // answers and, being last, never shadow a reason wrapped inside one
    // ("failed to forward tx ..., please try again ... 'nonce too low'").
    ("rate limit", C::Transient),
    ("rate exceeded", C::Transient),
    ("too many requests", C::Transient),
    ("limit exceeded", C::Transient),
    ("request limit reached", C::Transient),
    ("service unavailable", C::Transient),
    ("try again", C::Transient),
    ("node is syncing", C::Transient),
    ("not yet in sync", C::Transient),
    ("timeout", C::Transient),
    ("timed out", C::Transient),
];
