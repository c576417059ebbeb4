//! Signers against a real anvil: local keys (env, keystore) and remote
//! `eth_signTransaction`, including a remote signer that lies.
//!
//! Each test owns its anvil and its environment variable names, so the
//! tests run in parallel without racing on process state.
#![allow(clippy::unwrap_used)]

use std::{path::PathBuf, time::Duration};

use alloy::{
    consensus::{SignableTransaction, TxEip1559, TxEnvelope, TxLegacy, TypedTransaction},
    eips::eip2718::Encodable2718,
    primitives::{keccak256, Address, Bytes, TxKind, U256},
    signers::{local::PrivateKeySigner, SignerSync},
};
use serde_json::{json, Value};
use support::{send_raw, Anvil, Responder, CHAIN_ID, DEV_ADDRESS, DEV_KEY, RECIPIENT};
use txmgr_actors::signer::{build_signer, SignerError, SignerSpec, TxSigner};

const TIMEOUT: Duration = Duration::from_secs(5);

fn eip1559(nonce: u64) -> TypedTransaction {
    TypedTransaction::Eip1559(TxEip1559 {
        chain_id: CHAIN_ID,
        nonce,
        gas_limit: 21_000,
        max_fee_per_gas: 10_000_000_000,
        max_priority_fee_per_gas: 1_000_000_000,
        to: TxKind::Call(RECIPIENT),
        value: U256::from(1_000_000_000_000_000u64),
        input: Bytes::new(),
        ..Default::default()
    })
}

/// Legacy without a chain id: the signer must add it (EIP-155).
fn legacy(nonce: u64) -> TypedTransaction {
    TypedTransaction::Legacy(TxLegacy {
        chain_id: None,
        nonce,
        gas_price: 10_000_000_000,
        gas_limit: 21_000,
        to: TxKind::Call(RECIPIENT),
        value: U256::from(7),
        input: Bytes::new(),
    })
}

/// Signs an EIP-1559 and a legacy transfer with `signer`; anvil must accept
/// both and report our hashes.
async fn assert_anvil_accepts(anvil: &Anvil, signer: &dyn TxSigner) {
    for tx in [eip1559(0), legacy(1)] {
        let signed = signer.sign(tx).await.unwrap();
        assert_eq!(signed.hash, keccak256(&signed.raw));
        assert_eq!(send_raw(anvil, &signed.raw).await, signed.hash);
    }
}

fn set_env(var: &str, value: &str) {
    std::env::set_var(var, value);
}

#[tokio::test]
async fn env_signer_eip1559_and_legacy_are_accepted_by_anvil() {
    let anvil = Anvil::start().await;
    set_env("TXMGR_T_SIGNER_ENV_OK", DEV_KEY);
    let spec = SignerSpec::env("TXMGR_T_SIGNER_ENV_OK");
    let signer = build_signer(&spec, DEV_ADDRESS, CHAIN_ID, TIMEOUT)
        .await
        .unwrap();
    assert_eq!(signer.address(), DEV_ADDRESS);
    assert_anvil_accepts(&anvil, signer.as_ref()).await;
}

#[tokio::test]
async fn env_key_without_prefix_for_another_address_is_wrong_address() {
    set_env("TXMGR_T_SIGNER_ENV_OTHER", DEV_KEY.trim_start_matches("0x"));
    let spec = SignerSpec::env("TXMGR_T_SIGNER_ENV_OTHER");
    let err = build_signer(&spec, RECIPIENT, CHAIN_ID, TIMEOUT)
        .await
        .unwrap_err();
    assert!(
        matches!(err, SignerError::WrongAddress { expected, got } if expected == RECIPIENT && got == DEV_ADDRESS),
        "{err:?}"
    );
    assert!(!err.to_string().contains(&DEV_KEY[2..]));
}

#[tokio::test]
async fn env_missing_empty_or_garbage_errors_never_contain_the_value() {
    let garbage = format!("{}zz", &DEV_KEY[..64]);
    let cases = [
        ("TXMGR_T_SIGNER_ENV_UNSET", None, "not set"),
        ("TXMGR_T_SIGNER_ENV_EMPTY", Some("  "), "empty"),
        ("TXMGR_T_SIGNER_ENV_GARBAGE", Some(garbage.as_str()), "hex"),
        ("TXMGR_T_SIGNER_ENV_SHORT", Some(&DEV_KEY[..40]), "hex"),
        (
            "TXMGR_T_SIGNER_ENV_ZERO",
            Some(&"0".repeat(64)[..]),
            "secp256k1",
        ),
    ];
    for (var, value, phrase) in cases {
        if let Some(value) = value {
            set_env(var, value);
        }
        let spec = SignerSpec::env(var);
        let err = build_signer(&spec, DEV_ADDRESS, CHAIN_ID, TIMEOUT)
            .await
            .unwrap_err();
        let (shown, debug) = (err.to_string(), format!("{err:?}"));
        assert!(matches!(err, SignerError::Config(_)), "{var}: {debug}");
        assert!(
            shown.contains(var) && shown.contains(phrase),
            "{var}: {shown}"
        );
        if let Some(value) = value.filter(|v| !v.trim().is_empty()) {
            // Not even a recognisable part of the value may leak.
            let probe = &value[2..12];
            assert!(
                !shown.contains(probe) && !debug.contains(probe),
                "{var}: {shown}"
            );
        }
    }
}

#[tokio::test]
async fn debug_output_shows_kind_and_address_but_no_key() {
    set_env("TXMGR_T_SIGNER_ENV_DEBUG", DEV_KEY);
    let spec = SignerSpec::env("TXMGR_T_SIGNER_ENV_DEBUG");
    let signer = build_signer(&spec, DEV_ADDRESS, CHAIN_ID, TIMEOUT)
        .await
        .unwrap();
    let shown = format!("{signer:?} {spec:?}");
    assert!(shown.contains("env"), "{shown}");
    assert!(
        shown.to_lowercase().contains(&format!("{DEV_ADDRESS:x}")),
        "{shown}"
    );
    assert!(!shown.contains(&DEV_KEY[2..18]), "{shown}");
    let pretty = format!("{signer:#?}");
    assert!(!pretty.contains(&DEV_KEY[2..18]), "{pretty}");
}

/// A keystore of [`DEV_KEY`] in a fresh temporary directory, removed on drop.
struct Keystore {
    dir: PathBuf,
    file: PathBuf,
}

impl Keystore {
    fn create(password: &str) -> Keystore {
        let dir = std::env::temp_dir().join(format!("txmgr-keystore-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let key = alloy::primitives::hex::decode(DEV_KEY).unwrap();
        let mut rng = alloy::signers::k256::elliptic_curve::rand_core::OsRng;
        PrivateKeySigner::encrypt_keystore(&dir, &mut rng, key, password, Some("key.json"))
            .unwrap();
        let file = dir.join("key.json");
        Keystore { dir, file }
    }
}

impl Drop for Keystore {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[tokio::test]
async fn keystore_signer_is_accepted_by_anvil() {
    let anvil = Anvil::start().await;
    let keystore = Keystore::create("correct horse");
    set_env("TXMGR_T_SIGNER_KS_PASSWORD_OK", "correct horse");
    let spec = SignerSpec::Keystore {
        path: keystore.file.clone(),
        password_env: "TXMGR_T_SIGNER_KS_PASSWORD_OK".into(),
    };
    let signer = build_signer(&spec, DEV_ADDRESS, CHAIN_ID, TIMEOUT)
        .await
        .unwrap();
    let shown = format!("{signer:?}");
    assert!(
        shown.contains("keystore") && !shown.contains("correct horse"),
        "{shown}"
    );
    assert_anvil_accepts(&anvil, signer.as_ref()).await;
}

#[tokio::test]
async fn keystore_wrong_or_missing_password_is_a_clear_error() {
    let keystore = Keystore::create("correct horse");
    set_env("TXMGR_T_SIGNER_KS_PASSWORD_BAD", "battery staple");
    let spec = SignerSpec::Keystore {
        path: keystore.file.clone(),
        password_env: "TXMGR_T_SIGNER_KS_PASSWORD_BAD".into(),
    };
    let err = build_signer(&spec, DEV_ADDRESS, CHAIN_ID, TIMEOUT)
        .await
        .unwrap_err();
    let shown = err.to_string();
    assert!(matches!(err, SignerError::Config(_)), "{err:?}");
    assert!(shown.contains("wrong password"), "{shown}");
    assert!(shown.contains("TXMGR_T_SIGNER_KS_PASSWORD_BAD"), "{shown}");
    assert!(
        !shown.contains("battery") && !shown.contains("correct"),
        "{shown}"
    );

    let spec = SignerSpec::Keystore {
        path: keystore.file.clone(),
        password_env: "TXMGR_T_SIGNER_KS_PASSWORD_UNSET".into(),
    };
    let err = build_signer(&spec, DEV_ADDRESS, CHAIN_ID, TIMEOUT)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("not set"), "{err}");

    set_env("TXMGR_T_SIGNER_KS_PASSWORD_NOFILE", "x");
    let spec = SignerSpec::Keystore {
        path: keystore.dir.join("absent.json"),
        password_env: "TXMGR_T_SIGNER_KS_PASSWORD_NOFILE".into(),
    };
    let err = build_signer(&spec, DEV_ADDRESS, CHAIN_ID, TIMEOUT)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("absent.json"), "{err}");
}

#[tokio::test]
async fn remote_signer_anvil_signs_and_anvil_accepts() {
    let anvil = Anvil::start().await;
    let spec = SignerSpec::remote(anvil.rpc_url(), None);
    let signer = build_signer(&spec, DEV_ADDRESS, CHAIN_ID, TIMEOUT)
        .await
        .unwrap();
    assert!(format!("{signer:?}").contains("remote"));
    assert_anvil_accepts(&anvil, signer.as_ref()).await;
}

#[tokio::test]
async fn remote_signer_without_our_account_is_rejected_at_build() {
    let anvil = Anvil::start().await;
    let stranger = Address::repeat_byte(0x42);
    let spec = SignerSpec::remote(anvil.rpc_url(), None);
    let err = build_signer(&spec, stranger, CHAIN_ID, TIMEOUT)
        .await
        .unwrap_err();
    assert!(matches!(err, SignerError::Config(_)), "{err:?}");
    assert!(err.to_string().contains(&stranger.to_string()), "{err}");
}

/// A raw transaction signed by `key` for `tx`, as a remote would return it.
fn signed_by(key: &str, tx: TypedTransaction) -> String {
    let key: PrivateKeySigner = key.parse().unwrap();
    let sig = key.sign_hash_sync(&tx.signature_hash()).unwrap();
    let raw = TxEnvelope::from((tx, sig)).encoded_2718();
    alloy::primitives::hex::encode_prefixed(raw)
}

/// A fake remote signer that lists `DEV_ADDRESS` (or lacks `eth_accounts`
/// when `accounts` is `None`) and answers every signing request with `raw`.
async fn lying_signer(accounts: Option<Value>, raw: Value) -> Responder {
    Responder::start(move |method| match (method, &accounts) {
        ("eth_accounts", Some(list)) => json!({ "result": list }),
        ("eth_signTransaction", _) => json!({ "result": raw }),
        _ => json!({"error": {"code": -32601, "message": "Method not found"}}),
    })
    .await
}

#[tokio::test]
async fn remote_signer_returning_another_transaction_is_refused() {
    // Validly signed by the right key, but for nonce 5 instead of 0.
    let swapped = signed_by(DEV_KEY, eip1559(5));
    let server = lying_signer(Some(json!([DEV_ADDRESS])), json!(swapped)).await;
    let spec = SignerSpec::remote(server.url.clone(), None);
    let signer = build_signer(&spec, DEV_ADDRESS, CHAIN_ID, TIMEOUT)
        .await
        .unwrap();
    let err = signer.sign(eip1559(0)).await.unwrap_err();
    assert!(
        matches!(err, SignerError::Tampered { field: "nonce" }),
        "{err:?}"
    );
    assert!(!err.is_transient());

    // The same bytes in geth's `{raw, tx}` shape are checked just the same.
    let server = lying_signer(None, json!({ "raw": swapped, "tx": {} })).await;
    let spec = SignerSpec::remote(server.url.clone(), None);
    // No eth_accounts: accepted at build, caught at signing.
    let signer = build_signer(&spec, DEV_ADDRESS, CHAIN_ID, TIMEOUT)
        .await
        .unwrap();
    let err = signer.sign(eip1559(0)).await.unwrap_err();
    assert!(
        matches!(err, SignerError::Tampered { field: "nonce" }),
        "{err:?}"
    );
}

#[tokio::test]
async fn remote_signer_signing_with_another_key_is_wrong_address() {
    let other = PrivateKeySigner::random();
    let other_key = alloy::primitives::hex::encode(other.to_bytes());
    let forged = signed_by(&other_key, eip1559(0));
    let server = lying_signer(None, json!({ "raw": forged })).await;
    let spec = SignerSpec::remote(server.url.clone(), None);
    let signer = build_signer(&spec, DEV_ADDRESS, CHAIN_ID, TIMEOUT)
        .await
        .unwrap();
    let err = signer.sign(eip1559(0)).await.unwrap_err();
    assert!(
        matches!(err, SignerError::WrongAddress { expected, got } if expected == DEV_ADDRESS && got == other.address()),
        "{err:?}"
    );
}

#[tokio::test]
async fn remote_signer_down_or_silent_is_unavailable() {
    // Nothing listens on a port we just released.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port();
    let spec = SignerSpec::remote(format!("http://user:s3cret@127.0.0.1:{port}"), None);
    let err = build_signer(&spec, DEV_ADDRESS, CHAIN_ID, TIMEOUT)
        .await
        .unwrap_err();
    assert!(err.is_transient(), "{err:?}");
    assert!(!format!("{err} {err:?}").contains("s3cret"), "{err}");

    let silent = Responder::silent().await;
    let spec = SignerSpec::remote(silent.url.clone(), None);
    let short = Duration::from_millis(300);
    let err = build_signer(&spec, DEV_ADDRESS, CHAIN_ID, short)
        .await
        .unwrap_err();
    assert!(matches!(err, SignerError::Unavailable(_)), "{err:?}");
    assert!(err.to_string().contains("no answer within"), "{err}");
}

#[tokio::test]
async fn remote_signer_error_answer_is_refused() {
    let server = Responder::start(|method| match method {
        "eth_accounts" => json!({ "result": [DEV_ADDRESS] }),
        _ => json!({"error": {"code": -32000, "message": "request denied by operator"}}),
    })
    .await;
    let spec = SignerSpec::remote(server.url.clone(), None);
    let signer = build_signer(&spec, DEV_ADDRESS, CHAIN_ID, TIMEOUT)
        .await
        .unwrap();
    let err = signer.sign(legacy(0)).await.unwrap_err();
    assert!(matches!(err, SignerError::Refused(_)), "{err:?}");
    assert!(err.to_string().contains("request denied"), "{err}");
}

#[test]
fn typed_dev_accounts_are_the_kits() {
    let kit: Address = txmgr_testkit::DEV_ADDRESS_0.parse().unwrap();
    assert_eq!(DEV_ADDRESS, kit);
    let kit: Address = txmgr_testkit::DEV_ADDRESS_1.parse().unwrap();
    assert_eq!(RECIPIENT, kit);
}

// The kit's anvil plus a scripted remote signer; in a sibling directory so
// that cargo does not build it as a test target of its own.
#[path = "signer/support.rs"]
mod support;
