//! Every message in `rpc-errors.json` must classify as its class says.
//!
//! The vectors are read from the copy committed at `actors/tests/data/`, so
//! the test does not depend on `shared/` being beside the clone; only when
//! that copy is missing does it fall back to `../../shared/data/`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use txmgr_actors::chain::{classify_rpc_error, BroadcastClass, InvalidReason};

/// The committed copy, preferred so a fresh clone tests on its own.
const COMMITTED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/rpc-errors.json");
/// The design's original, beside the repository.
const SHARED: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../shared/data/rpc-errors.json"
);

#[derive(Deserialize)]
struct Vectors {
    classes: BTreeMap<String, Vec<Vector>>,
}

#[derive(Deserialize)]
struct Vector {
    client: String,
    message: String,
    code: Option<i64>,
}

/// The class each JSON class name stands for.
fn expected_for(class: &str) -> Option<BroadcastClass> {
    use BroadcastClass as C;
    use InvalidReason as R;
    Some(match class {
        "already_known" => C::AlreadyKnown,
        "nonce_too_low" => C::NonceTooLow,
        "nonce_too_high" => C::NonceTooHigh,
        "replacement_underpriced" => C::ReplacementUnderpriced,
        "underpriced" => C::Underpriced,
        "insufficient_funds" => C::InsufficientFunds,
        "fee_cap_too_low_vs_basefee" => C::FeeCapTooLow,
        "tip_above_fee_cap" => C::Invalid(R::TipAboveFeeCap),
        "intrinsic_gas_too_low" => C::Invalid(R::IntrinsicGas),
        "gas_limit_exceeds_block" => C::Invalid(R::GasLimit),
        "tx_fee_exceeds_cap" => C::TxFeeExceedsCap,
        "txpool_full" => C::PoolFull,
        "invalid_sender_or_signature" => C::Invalid(R::InvalidSignature),
        "chain_id_mismatch" => C::Invalid(R::ChainId),
        "tx_type_not_supported" => C::Invalid(R::TxType),
        "oversized_data" => C::Invalid(R::Oversized),
        "execution_reverted" => C::Invalid(R::Reverted),
        "rate_limited_or_unavailable" => C::Transient,
        _ => return None,
    })
}

/// Vectors whose text does not carry their file class's meaning, as
/// (file class, message, expected, why). Each must still match a vector.
const DECISIONS: &[(&str, &str, BroadcastClass, &str)] = &[
    (
        "execution_reverted",
        "gas required exceeds allowance (30000000)",
        BroadcastClass::Transient,
        "the file keeps it as a near-miss: an estimateGas answer (out of gas or a \
         balance-capped allowance), not a revert; unknown at broadcast, so transient",
    ),
    (
        "oversized_data",
        "Internal error",
        BroadcastClass::Transient,
        "besu's -32603 catch-all: also what any node says on a real internal failure; \
         the text names no reason, and unknown text is never a definitive refusal",
    ),
];

fn vectors_path() -> PathBuf {
    if Path::new(COMMITTED).exists() {
        PathBuf::from(COMMITTED)
    } else {
        PathBuf::from(SHARED)
    }
}

#[test]
fn every_vector_classifies_as_its_class() {
    let path = vectors_path();
    let raw =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    if path != Path::new(SHARED) {
        if let Ok(shared) = std::fs::read_to_string(SHARED) {
            if shared != raw {
                eprintln!("note: {COMMITTED} differs from {SHARED}; re-copy to test new vectors");
            }
        }
    }
    let vectors: Vectors = serde_json::from_str(&raw).expect("rpc-errors.json parses");

    let mut checked = 0;
    let mut decisions_used = vec![false; DECISIONS.len()];
    let mut mismatches = Vec::new();
    for (class, list) in &vectors.classes {
        let Some(by_class) = expected_for(class) else {
            mismatches.push(format!("class {class:?} has no BroadcastClass mapping"));
            continue;
        };
        for v in list {
            let decision = DECISIONS
                .iter()
                .position(|(c, m, _, _)| c == class && *m == v.message);
            let expected = match decision {
                Some(i) => {
                    decisions_used[i] = true;
                    DECISIONS[i].2
                }
                None => by_class,
            };
            let got = classify_rpc_error(v.code, &v.message);
            checked += 1;
            if got != expected {
                mismatches.push(format!(
                    "[{class}] {} (code {:?}): {:?}\n    expected {expected:?}, got {got:?}",
                    v.client, v.code, v.message
                ));
            }
        }
    }
    for (used, (class, message, _, _)) in decisions_used.iter().zip(DECISIONS) {
        if !used {
            mismatches.push(format!(
                "decision for [{class}] {message:?} matches no vector"
            ));
        }
    }

    assert!(
        mismatches.is_empty(),
        "{} of {checked} vectors from {} misclassified:\n{}",
        mismatches.len(),
        path.display(),
        mismatches.join("\n")
    );
    eprintln!(
        "{checked} vectors from {} classify as expected",
        path.display()
    );
}
