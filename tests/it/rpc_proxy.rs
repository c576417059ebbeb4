//! The fault-injecting JSON-RPC proxy harness against a real anvil: clean
//! forwarding, injected HTTP errors, transport-level resets, broadcasts that
//! reach the chain but never get answered, delays, and seeded determinism.

use std::time::Duration;

use crate::common::{
    rpc_proxy::{Faults, ProxyCounts, RpcProxy},
    Anvil, CHAIN_ID, DEV_PRIVATE_KEY_0,
};
use alloy::{
    consensus::{SignableTransaction, TxEip1559, TxEnvelope},
    eips::eip2718::Encodable2718,
    primitives::{address, Bytes, TxKind, U256},
    signers::{local::PrivateKeySigner, SignerSync},
};
use serde_json::{json, Value};

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(10))
        .build()
        .expect("reqwest client")
}

fn call(method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
}

/// POSTs `body` to `url` and returns the decoded JSON answer.
async fn post(client: &reqwest::Client, url: &str, body: &Value) -> reqwest::Result<Value> {
    client
        .post(url)
        .json(body)
        .send()
        .await?
        .error_for_status()?
        .json()
        .await
}

/// A signed EIP-1559 transfer from dev account 0 with nonce 0.
fn signed_transfer() -> (Vec<u8>, String) {
    let key: PrivateKeySigner = DEV_PRIVATE_KEY_0.parse().expect("dev key");
    let tx = TxEip1559 {
        chain_id: CHAIN_ID,
        nonce: 0,
        gas_limit: 21_000,
        max_fee_per_gas: 10_000_000_000,
        max_priority_fee_per_gas: 1_000_000_000,
        to: TxKind::Call(address!("70997970C51812dc3A010C7d01b50e0d17dc79C8")),
        value: U256::from(1),
        input: Bytes::new(),
        ..Default::default()
    };
    let signature = key
        .sign_hash_sync(&tx.signature_hash())
        .expect("signing the transfer");
    let envelope = TxEnvelope::from(tx.into_signed(signature));
    let hash = format!("{:#x}", envelope.tx_hash());
    (envelope.encoded_2718(), hash)
}

#[tokio::test]
async fn forwards_unchanged_without_faults() {
    let anvil = Anvil::start().await;
    let proxy = RpcProxy::start(&anvil.rpc_url(), 1).await;
    let client = client();

    let via_proxy = post(&client, &proxy.url(), &call("eth_chainId", json!([])))
        .await
        .expect("eth_chainId through the proxy");
    let direct = anvil.rpc("eth_chainId", json!([])).await;
    assert_eq!(via_proxy["result"], direct);
    assert_eq!(via_proxy["id"], 1);

    // Batches pass through unchanged, answers included.
    let batch = json!([
        {"jsonrpc": "2.0", "id": 7, "method": "eth_chainId", "params": []},
        {"jsonrpc": "2.0", "id": 8, "method": "eth_blockNumber", "params": []},
    ]);
    let answers = post(&client, &proxy.url(), &batch)
        .await
        .expect("batch through the proxy");
    let answers = answers.as_array().expect("batch answer is an array");
    assert_eq!(answers.len(), 2);
    assert!(answers
        .iter()
        .any(|a| a["id"] == 7 && a["result"] == direct));
    assert!(answers
        .iter()
        .any(|a| a["id"] == 8 && a["result"].is_string()));

    // A JSON-RPC error from anvil comes back as anvil sent it.
    let unknown = post(&client, &proxy.url(), &call("no_suchMethod", json!([])))
        .await
        .expect("an RPC error is still HTTP 200");
    assert!(unknown["error"].is_object(), "{unknown}");

    assert_eq!(
        proxy.counts(),
        ProxyCounts {
            requests: 3,
            forwarded: 3,
            ..ProxyCounts::default()
        }
    );
}

#[tokio::test]
async fn many_concurrent_keep_alive_connections() {
    let anvil = Anvil::start().await;
    let proxy = RpcProxy::start(&anvil.rpc_url(), 2).await;
    let expected = anvil.rpc("eth_chainId", json!([])).await;
    // Separate clients force separate connections; each reuses its own.
    let tasks = (0..32).map(|_| {
        let url = proxy.url();
        let expected = expected.clone();
        tokio::spawn(async move {
            let client = client();
            for _ in 0..5 {
                let answer = post(&client, &url, &call("eth_chainId", json!([])))
                    .await
                    .expect("eth_chainId through the proxy");
                assert_eq!(answer["result"], expected);
            }
        })
    });
    for task in futures::future::join_all(tasks).await {
        task.expect("client task");
    }
    assert_eq!(proxy.counts().requests, 160);
    assert_eq!(proxy.counts().forwarded, 160);
}

#[tokio::test]
async fn error_rate_answers_bad_gateway_or_unavailable() {
    let anvil = Anvil::start().await;
    let proxy = RpcProxy::start(&anvil.rpc_url(), 3).await;
    proxy.set(Faults {
        error_rate: 1.0,
        ..Faults::default()
    });
    let client = client();
    for _ in 0..10 {
        let response = client
            .post(proxy.url())
            .json(&call("eth_chainId", json!([])))
            .send()
            .await
            .expect("an injected error is still an HTTP answer");
        let status = response.status().as_u16();
        assert!(status == 502 || status == 503, "status {status}");
    }
    let counts = proxy.counts();
    assert_eq!((counts.errors, counts.forwarded), (10, 0));

    // Faults off: the same client (and connection) is served again.
    proxy.set(Faults::default());
    post(&client, &proxy.url(), &call("eth_chainId", json!([])))
        .await
        .expect("clean answer after faults are lifted");
    assert_eq!(proxy.counts().forwarded, 1);
}

#[tokio::test]
async fn reset_rate_fails_the_call_at_the_transport() {
    let anvil = Anvil::start().await;
    let proxy = RpcProxy::start(&anvil.rpc_url(), 4).await;
    let client = client();
    // Warm a keep-alive connection first, so a reset hits a pooled one too.
    post(&client, &proxy.url(), &call("eth_chainId", json!([])))
        .await
        .expect("warm-up call");
    proxy.set(Faults {
        reset_rate: 1.0,
        ..Faults::default()
    });
    for attempt in 1..=3 {
        let error = client
            .post(proxy.url())
            .json(&call("eth_chainId", json!([])))
            .send()
            .await
            .expect_err("a reset must not produce an HTTP answer");
        assert!(
            error.is_request() || error.is_connect() || error.is_body(),
            "unexpected error kind: {error:?}"
        );
        assert!(error.status().is_none(), "{error:?}");
        assert_eq!(proxy.counts().resets, attempt);
    }
    assert_eq!(proxy.counts().forwarded, 1);
}

#[tokio::test]
async fn dropped_send_reaches_the_chain_but_not_the_client() {
    let anvil = Anvil::start().await;
    let proxy = RpcProxy::start(&anvil.rpc_url(), 5).await;
    proxy.set(Faults {
        send_drop_rate: 1.0,
        ..Faults::default()
    });
    let client = client();

    // Other methods are untouched by send_drop_rate.
    post(&client, &proxy.url(), &call("eth_chainId", json!([])))
        .await
        .expect("eth_chainId is not a send");

    let (raw, hash) = signed_transfer();
    let raw_hex = format!("0x{}", hex::encode(&raw));
    let error = post(
        &client,
        &proxy.url(),
        &call("eth_sendRawTransaction", json!([raw_hex])),
    )
    .await
    .expect_err("the client must never hear the send's answer");
    assert!(error.status().is_none(), "{error:?}");

    let tx = anvil.rpc("eth_getTransactionByHash", json!([hash])).await;
    assert!(!tx.is_null(), "the dropped broadcast reached anvil");
    assert_eq!(tx["hash"], json!(hash));

    let counts = proxy.counts();
    assert_eq!(counts.dropped_sends, 1);
    assert_eq!(counts.forwarded, 2);
    assert_eq!(counts.dropped_after_forward, 0);
}

#[tokio::test]
async fn drop_after_forward_applies_to_any_method() {
    let anvil = Anvil::start().await;
    let proxy = RpcProxy::start(&anvil.rpc_url(), 6).await;
    let before = anvil.block_number().await;
    proxy.set(Faults {
        drop_after_forward_rate: 1.0,
        ..Faults::default()
    });
    let error = post(&client(), &proxy.url(), &call("evm_mine", json!([])))
        .await
        .expect_err("the answer is dropped");
    assert!(error.status().is_none(), "{error:?}");
    // The call took effect upstream all the same.
    assert_eq!(anvil.block_number().await, before + 1);
    assert_eq!(proxy.counts().dropped_after_forward, 1);
}

#[tokio::test]
async fn delayed_requests_still_answer_correctly() {
    let anvil = Anvil::start().await;
    let proxy = RpcProxy::start(&anvil.rpc_url(), 7).await;
    proxy.set(Faults {
        delay_rate: 1.0,
        max_delay: Duration::from_millis(100),
        ..Faults::default()
    });
    let client = client();
    let expected = anvil.rpc("eth_chainId", json!([])).await;
    for _ in 0..3 {
        let answer = post(&client, &proxy.url(), &call("eth_chainId", json!([])))
            .await
            .expect("a delayed call still answers");
        assert_eq!(answer["result"], expected);
    }
    let counts = proxy.counts();
    assert_eq!((counts.delayed, counts.forwarded), (3, 3));
}

/// Outcome of each of `n` sequential calls: HTTP status, or 0 for a reset.
async fn outcomes(proxy: &RpcProxy, n: usize) -> Vec<u16> {
    let client = client();
    let mut out = Vec::new();
    for _ in 0..n {
        let sent = client
            .post(proxy.url())
            .json(&call("eth_chainId", json!([])))
            .send()
            .await;
        out.push(sent.map(|r| r.status().as_u16()).unwrap_or(0));
    }
    out
}

#[tokio::test]
async fn same_seed_same_fault_sequence() {
    let anvil = Anvil::start().await;
    let faults = Faults {
        error_rate: 0.3,
        reset_rate: 0.3,
        ..Faults::default()
    };
    let a = RpcProxy::start(&anvil.rpc_url(), 42).await;
    let b = RpcProxy::start(&anvil.rpc_url(), 42).await;
    a.set(faults);
    b.set(faults);
    let first = outcomes(&a, 30).await;
    let second = outcomes(&b, 30).await;
    assert_eq!(first, second);
    // The mix really is mixed: answers, injected errors and resets.
    assert!(first.contains(&200), "{first:?}");
    assert!(first.iter().any(|s| *s == 502 || *s == 503), "{first:?}");
    assert!(first.contains(&0), "{first:?}");
}

#[tokio::test]
async fn alloy_provider_sees_faults_as_transport_errors() {
    use alloy::providers::{Provider, RootProvider};

    let anvil = Anvil::start().await;
    let proxy = RpcProxy::start(&anvil.rpc_url(), 8).await;
    let provider: RootProvider = RootProvider::new_http(proxy.url().parse().expect("proxy url"));
    assert_eq!(provider.get_chain_id().await.expect("clean call"), CHAIN_ID);
    for faults in [
        Faults {
            reset_rate: 1.0,
            ..Faults::default()
        },
        Faults {
            error_rate: 1.0,
            ..Faults::default()
        },
        Faults {
            drop_after_forward_rate: 1.0,
            ..Faults::default()
        },
    ] {
        proxy.set(faults);
        provider
            .get_block_number()
            .await
            .expect_err("a fault fails the provider call");
    }
    proxy.set(Faults::default());
    assert_eq!(provider.get_chain_id().await.expect("recovered"), CHAIN_ID);
}
