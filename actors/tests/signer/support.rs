//! The kit's anvil with the one call the signer tests add, and a scripted
//! JSON-RPC responder standing in for a misbehaving remote signer.

use std::{sync::Arc, time::Duration};

use alloy::primitives::{Bytes, B256};
use serde_json::{json, Value};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
    task::JoinHandle,
};
pub(crate) use txmgr_testkit::{Anvil, CHAIN_ID, DEV_PRIVATE_KEY_0 as DEV_KEY};

/// Address of [`DEV_KEY`], typed (the kit's `DEV_ADDRESS_0`).
pub(crate) const DEV_ADDRESS: alloy::primitives::Address =
    alloy::primitives::address!("f39Fd6e51aad88F6F4ce6aB8827279cffFb92266");

/// anvil's second dev account, used as a transfer recipient (the kit's
/// `DEV_ADDRESS_1`).
pub(crate) const RECIPIENT: alloy::primitives::Address =
    alloy::primitives::address!("70997970C51812dc3A010C7d01b50e0d17dc79C8");

/// How long an automining anvil may take to produce a receipt.
const RECEIPT_TIMEOUT: Duration = Duration::from_secs(10);

/// Broadcasts `raw`, returns the hash anvil reports, and waits for a
/// successful receipt (anvil automines).
pub(crate) async fn send_raw(anvil: &Anvil, raw: &Bytes) -> B256 {
    let hash = anvil
        .try_rpc("eth_sendRawTransaction", json!([raw]))
        .await
        .unwrap_or_else(|e| panic!("anvil rejected the signed transaction: {e}"));
    let hash: B256 = serde_json::from_value(hash).expect("hash");
    let receipt = txmgr_testkit::eventually(RECEIPT_TIMEOUT, Duration::from_millis(20), || async {
        let receipt = anvil.rpc("eth_getTransactionReceipt", json!([hash])).await;
        (!receipt.is_null()).then_some(receipt)
    })
    .await;
    assert_eq!(receipt["status"], "0x1", "transaction failed: {receipt}");
    hash
}

/// A scripted JSON-RPC server: `answer(method)` gives the `result` or
/// `error` member of each reply. Stopped on drop.
pub(crate) struct Responder {
    /// HTTP endpoint.
    pub(crate) url: String,
    task: JoinHandle<()>,
}

impl Responder {
    /// Starts the server on a free loopback port.
    pub(crate) async fn start(answer: impl Fn(&str) -> Value + Send + Sync + 'static) -> Responder {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let answer = Arc::new(answer);
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream, answer.clone()));
            }
        });
        Responder { url, task }
    }

    /// A server that accepts connections and never answers.
    pub(crate) async fn silent() -> Responder {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let task = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((stream, _)) = listener.accept().await {
                held.push(stream);
            }
        });
        Responder { url, task }
    }
}

impl Drop for Responder {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Reads one HTTP request, answers it and closes the connection.
async fn serve(mut stream: TcpStream, answer: Arc<impl Fn(&str) -> Value>) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let body = loop {
        let n = match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        buf.extend_from_slice(&chunk[..n]);
        let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
            continue;
        };
        let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
        let length: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        if buf.len() >= end + 4 + length {
            break buf[end + 4..end + 4 + length].to_vec();
        }
    };
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let method = request["method"].as_str().unwrap_or_default();
    let mut reply = json!({"jsonrpc": "2.0", "id": request["id"]});
    if let (Some(reply), Value::Object(member)) = (reply.as_object_mut(), answer(method)) {
        reply.extend(member);
    }
    let body = reply.to_string();
    let response = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(response.as_bytes()).await;
    let _ = stream.shutdown().await;
}
