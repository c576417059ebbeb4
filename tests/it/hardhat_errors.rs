//! Hardhat's node (EDR) refuses transactions with texts of its own: provoke
//! each refusal with real signed bytes, check the text is the one recorded in
//! the classifier's vectors (`actors/tests/data/rpc-errors.json`, evidence
//! `observed`) and that the classifier reads it as meant. A new pinned Hardhat
//! that changes a text fails here, not in a stuck intent.

use std::time::Duration;

use crate::common::{hardhat::Hardhat, DevNode, Mining};
use alloy::{
    consensus::{SignableTransaction, TxEip1559, TxEnvelope},
    eips::eip2718::Encodable2718,
    network::TxSignerSync,
    primitives::{keccak256, TxKind, U256},
    signers::local::PrivateKeySigner,
};
use serde_json::{json, Value};
use txmgr_actors::chain::{classify_rpc_error, BroadcastClass, InvalidReason};

const GWEI: u128 = 1_000_000_000;
const TO: &str = "0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc";
/// The code Hardhat answers every pool or validation refusal with.
const INVALID_INPUT: i64 = -32000;

/// A fresh sender with `balance` wei, so each case starts at nonce 0.
async fn sender(node: &Hardhat, balance: u128) -> PrivateKeySigner {
    let signer = PrivateKeySigner::random();
    node.set_balance(&format!("{:#x}", signer.address()), balance)
        .await;
    signer
}

/// A 1-wei transfer at `nonce` (100 gwei cap, 1 gwei tip, 21000 gas) after `edit`.
fn signed(signer: &PrivateKeySigner, nonce: u64, edit: impl FnOnce(&mut TxEip1559)) -> Vec<u8> {
    let mut tx = TxEip1559 {
        chain_id: crate::common::CHAIN_ID,
        nonce,
        gas_limit: 21_000,
        max_fee_per_gas: 100 * GWEI,
        max_priority_fee_per_gas: GWEI,
        to: TxKind::Call(TO.parse().expect("address")),
        value: U256::from(1),
        ..Default::default()
    };
    edit(&mut tx);
    let signature = signer.sign_transaction_sync(&mut tx).expect("sign");
    TxEnvelope::from(tx.into_signed(signature)).encoded_2718()
}

/// `eth_sendRawTransaction` over plain HTTP: the hash, or (code, message)
/// exactly as the node wrote them.
async fn send_raw(node: &Hardhat, raw: &[u8]) -> Result<String, (i64, String)> {
    let body: Value = reqwest::Client::new()
        .post(node.rpc_url())
        .timeout(Duration::from_secs(10))
        .json(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "eth_sendRawTransaction",
                      "params": [format!("0x{}", hex::encode(raw))]}),
        )
        .send()
        .await
        .expect("hardhat answers")
        .json()
        .await
        .expect("JSON-RPC body");
    match (&body["result"], &body["error"]) {
        (Value::String(hash), _) => Ok(hash.clone()),
        (_, error) => Err((
            error["code"].as_i64().expect("error code"),
            error["message"].as_str().expect("error message").to_owned(),
        )),
    }
}

/// What a refusal must look like: its code, its text (exactly, or only up to
/// a number that varies such as the base fee) and its class.
struct Refusal<'a> {
    case: &'a str,
    code: i64,
    text: String,
    prefix_only: bool,
    class: BroadcastClass,
}

/// Sends `raw`, expecting `want`; returns a description of any difference.
async fn expect_refusal(node: &Hardhat, raw: &[u8], want: Refusal<'_>) -> Option<String> {
    let (code, message) = match send_raw(node, raw).await {
        Ok(hash) => return Some(format!("{}: accepted as {hash}", want.case)),
        Err(error) => error,
    };
    eprintln!("{}: code {code}: {message}", want.case);
    let text_ok = if want.prefix_only {
        message.starts_with(&want.text)
    } else {
        message == want.text
    };
    let class = classify_rpc_error(Some(code), &message);
    (!text_ok || code != want.code || class != want.class).then(|| {
        format!(
            "{}: got code {code} {message:?} classified {class:?}; expected code {} {:?}{} classified {:?}",
            want.case,
            want.code,
            want.text,
            if want.prefix_only { "…" } else { "" },
            want.class
        )
    })
}

fn refusal<'a>(case: &'a str, text: &str, class: BroadcastClass) -> Refusal<'a> {
    Refusal {
        case,
        code: INVALID_INPUT,
        text: text.to_owned(),
        prefix_only: false,
        class,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hardhat_refusals_have_the_recorded_texts_and_classes() {
    use BroadcastClass as C;
    use InvalidReason as R;
    let node = Hardhat::start(Mining::Manual).await;
    let rich = 1_000 * GWEI * GWEI;
    let mut wrong = Vec::new();

    // Pool rules without automine: the pool holds what it accepted.
    let key = sender(&node, rich).await;
    let first = signed(&key, 0, |_| {});
    let hash = send_raw(&node, &first).await.expect("first accepted");
    assert_eq!(hash, format!("{:#x}", keccak256(&first)));
    let cases = [
        (
            first.clone(),
            refusal(
                "same bytes again",
                &format!("Known transaction: {hash}"),
                C::AlreadyKnown,
            ),
        ),
        (
            signed(&key, 0, |tx| tx.value = U256::from(2)),
            refusal(
                "same nonce, same fees",
                "Replacement transaction underpriced. A gasPrice/maxFeePerGas of at least \
                 110000000000 is necessary to replace the existing transaction with nonce 0.",
                C::ReplacementUnderpriced,
            ),
        ),
        (
            signed(&key, 0, |tx| tx.max_fee_per_gas = 110 * GWEI),
            refusal(
                "same nonce, tip not bumped",
                "Replacement transaction underpriced. A gasPrice/maxPriorityFeePerGas of at \
                 least 1100000000 is necessary to replace the existing transaction with nonce 0.",
                C::ReplacementUnderpriced,
            ),
        ),
    ];
    for (raw, want) in cases {
        wrong.extend(expect_refusal(&node, &raw, want).await);
    }
    node.mine().await;
    wrong.extend(
        expect_refusal(
            &node,
            &signed(&key, 0, |tx| tx.value = U256::from(3)),
            refusal(
                "nonce mined, pool mode",
                "Transaction nonce too low. Expected nonce to be at least 1 but got 0.",
                C::NonceTooLow,
            ),
        )
        .await,
    );
    node.rpc("evm_setBlockGasLimit", json!(["0x989680"])).await;
    node.mine().await;
    wrong.extend(
        expect_refusal(
            &node,
            &signed(&sender(&node, rich).await, 0, |tx| {
                tx.gas_limit = 12_000_000
            }),
            refusal(
                "above the block gas limit",
                "Transaction gas limit is 12000000 and exceeds block gas limit of 10000000",
                C::Invalid(R::GasLimit),
            ),
        )
        .await,
    );
    // What anvil and geth also do: a gap and a fee cap below the base fee wait
    // in the pool instead of being refused.
    for (case, raw) in [
        (
            "gapped nonce",
            signed(&sender(&node, rich).await, 5, |_| {}),
        ),
        (
            "fee cap below base fee",
            signed(&sender(&node, rich).await, 0, |tx| {
                tx.max_fee_per_gas = 1;
                tx.max_priority_fee_per_gas = 1;
            }),
        ),
    ] {
        match send_raw(&node, &raw).await {
            // Parked bytes would make every automine send below wait on them.
            Ok(hash) => node.drop_transaction(&hash).await,
            Err(error) => wrong.push(format!("{case}: refused in pool mode: {error:?}")),
        }
    }

    // Automine: nothing can wait in the pool, so gaps and low fee caps are refused.
    node.rpc("evm_setAutomine", json!([true])).await;
    let key = sender(&node, rich).await;
    send_raw(&node, &signed(&key, 0, |_| {}))
        .await
        .expect("mined at once");
    let broke = sender(&node, 0).await;
    let automine = [
        (
            signed(&key, 0, |tx| tx.value = U256::from(2)),
            refusal(
                "nonce mined, automine",
                "Nonce too low. Expected nonce to be 1 but got 0. \
                 Note that transactions can't be queued when automining.",
                C::NonceTooLow,
            ),
        ),
        (
            signed(&key, 3, |_| {}),
            refusal(
                "gapped nonce, automine",
                "Nonce too high. Expected nonce to be 1 but got 3. \
                 Note that transactions can't be queued when automining.",
                C::NonceTooHigh,
            ),
        ),
        (
            signed(&key, 1, |tx| {
                tx.max_fee_per_gas = 1;
                tx.max_priority_fee_per_gas = 1;
            }),
            Refusal {
                prefix_only: true,
                ..refusal(
                    "fee cap below base fee, automine",
                    "Transaction maxFeePerGas (1) is too low for the next block, \
                     which has a baseFeePerGas of ",
                    C::FeeCapTooLow,
                )
            },
        ),
        (
            signed(&broke, 0, |_| {}),
            refusal(
                "no balance",
                "Sender doesn't have enough funds to send tx. The max upfront cost is: \
                 2100000000000001 and the sender's balance is: 0.",
                C::InsufficientFunds,
            ),
        ),
        (
            signed(&key, 1, |tx| {
                tx.max_fee_per_gas = 2 * GWEI;
                tx.max_priority_fee_per_gas = 3 * GWEI;
            }),
            refusal(
                "tip above fee cap",
                "maxPriorityFeePerGas (3000000000) is bigger than maxFeePerGas (2000000000)",
                C::Invalid(R::TipAboveFeeCap),
            ),
        ),
        (
            signed(&key, 1, |tx| tx.gas_limit = 20_000),
            refusal(
                "gas below intrinsic",
                "Transaction requires at least 21000 gas but got 20000",
                C::Invalid(R::IntrinsicGas),
            ),
        ),
        (
            signed(&key, 1, |tx| tx.gas_limit = 1_000_000_000),
            refusal(
                "above the transaction gas cap (EIP-7825)",
                "Transaction gas limit is 1000000000 and exceeds transaction gas cap of 16777216",
                C::Invalid(R::GasLimit),
            ),
        ),
        (
            signed(&key, 1, |tx| tx.chain_id = 1),
            Refusal {
                code: -32602,
                ..refusal(
                    "another chain",
                    "Trying to send a raw transaction with an invalid chainId. \
                     The expected chainId is 31337",
                    C::Invalid(R::ChainId),
                )
            },
        ),
    ];
    for (raw, want) in automine {
        wrong.extend(expect_refusal(&node, &raw, want).await);
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
