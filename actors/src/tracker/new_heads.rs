//! A `newHeads` subscription over `ws://` or `wss://` on the endpoint chosen
//! for reads. It only wakes the head watcher: blocks are still fetched once
//! each through the chain client, so a lost or lying subscription costs
//! latency, never a block.
//!
//! Spoken directly over tokio-tungstenite (two JSON-RPC messages) so that
//! `wss://` uses the same rustls configuration, private CA included, as
//! every other client connection.

use std::{
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    time::Duration,
};

use futures::{SinkExt, StreamExt};
use ractor::ActorRef;
use tokio::sync::watch;
use tokio_tungstenite::{tungstenite::Message, Connector};

use super::{head::HeadMsg, Coalesced};
use crate::chain::WsTarget;

/// Wait before reconnecting a lost WebSocket.
const WS_RECONNECT: Duration = Duration::from_secs(1);

/// Bound on connecting and subscribing.
const WS_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A connection silent for this long is considered dead (heads come every
/// few seconds on any live chain; pings keep idle dev chains open).
const WS_PING_INTERVAL: Duration = Duration::from_secs(15);

const SUBSCRIBE: &str =
    r#"{"jsonrpc":"2.0","id":1,"method":"eth_subscribe","params":["newHeads"]}"#;

/// Wakes the head watcher on a new head; coalesced: at most one wake-up
/// waits in its mailbox (a watcher behind a slow RPC catches up over every
/// block in one round anyway). The watcher unmarks `queued` on every tick.
#[derive(Debug, Clone)]
pub(super) struct HeadWaker {
    pub(super) watcher: ActorRef<HeadMsg>,
    pub(super) queued: Arc<Coalesced>,
}

impl HeadWaker {
    /// False when the watcher is gone.
    fn wake(&self) -> bool {
        self.queued
            .offer(|| self.watcher.send_message(HeadMsg::Tick).is_ok())
    }
}

/// Keeps a subscription open on the current target (reconnecting after
/// failures, moving when reads move) and wakes the watcher on every head.
/// `up` is true while heads arrive.
pub(super) async fn follow_new_heads(
    mut targets: watch::Receiver<Option<WsTarget>>,
    watcher: HeadWaker,
    up: Arc<AtomicBool>,
) {
    loop {
        let target = targets.borrow_and_update().clone();
        let Some(target) = target else {
            up.store(false, Ordering::Relaxed);
            if targets.changed().await.is_err() {
                return;
            }
            continue;
        };
        tokio::select! {
            ended = subscribe(&target, &watcher, &up) => {
                up.store(false, Ordering::Relaxed);
                match ended {
                    Ok(Ended::WatcherGone) => return,
                    Ok(Ended::Closed) => tracing::warn!(target: "txmgr::head", endpoint = %target.name, "newHeads subscription closed; polling until reconnected"),
                    Err(reason) => tracing::warn!(target: "txmgr::head", endpoint = %target.name, error = %reason, "newHeads subscription failed; polling until reconnected"),
                }
                tokio::time::sleep(WS_RECONNECT).await;
            }
            changed = targets.changed() => {
                up.store(false, Ordering::Relaxed);
                if changed.is_err() {
                    return;
                }
                tracing::info!(target: "txmgr::head", from = %target.name, "reads moved to another endpoint; resubscribing to newHeads there");
            }
        }
    }
}

enum Ended {
    Closed,
    WatcherGone,
}

async fn subscribe(
    target: &WsTarget,
    watcher: &HeadWaker,
    up: &AtomicBool,
) -> Result<Ended, String> {
    let connector = Connector::Rustls(target.tls.clone());
    let connect = tokio_tungstenite::connect_async_tls_with_config(
        target.url.as_str(),
        None,
        false,
        Some(connector),
    );
    let (mut socket, _) = tokio::time::timeout(WS_CONNECT_TIMEOUT, connect)
        .await
        .map_err(|_| "connecting timed out".to_owned())?
        .map_err(|e| scrub(&e.to_string(), &target.url))?;
    socket
        .send(Message::text(SUBSCRIBE))
        .await
        .map_err(|e| scrub(&e.to_string(), &target.url))?;
    let mut ping = tokio::time::interval(WS_PING_INTERVAL);
    ping.tick().await;
    let mut silent_ticks = 0u32;
    loop {
        tokio::select! {
            message = socket.next() => {
                silent_ticks = 0;
                let text = match message {
                    None => return Ok(Ended::Closed),
                    Some(Err(e)) => return Err(scrub(&e.to_string(), &target.url)),
                    Some(Ok(Message::Text(text))) => text,
                    Some(Ok(Message::Close(_))) => return Ok(Ended::Closed),
                    Some(Ok(_)) => continue,
                };
                match classify(text.as_str()) {
                    Frame::Subscribed => {
                        up.store(true, Ordering::Relaxed);
                        tracing::info!(target: "txmgr::head", endpoint = %target.name, "following newHeads over WebSocket");
                    }
                    Frame::Head => {
                        if !watcher.wake() {
                            return Ok(Ended::WatcherGone);
                        }
                    }
                    Frame::Refused(reason) => return Err(format!("eth_subscribe refused: {reason}")),
                    Frame::Other => {}
                }
            }
            _ = ping.tick() => {
                silent_ticks += 1;
                if silent_ticks > 2 {
                    return Err("no message for two ping intervals".to_owned());
                }
                socket
                    .send(Message::Ping(Vec::new().into()))
                    .await
                    .map_err(|e| scrub(&e.to_string(), &target.url))?;
            }
        }
    }
}

/// What a text frame from the node is.
#[derive(Debug, PartialEq, Eq)]
enum Frame {
    /// The answer to our `eth_subscribe` with a subscription id.
    Subscribed,
    /// An `eth_subscription` notification.
    Head,
    /// The answer to our `eth_subscribe` with an error.
    Refused(String),
    /// Anything else.
    Other,
}

fn classify(text: &str) -> Frame {
    let Ok(value) = serde_json::from_str::<serde_json::Value>(text) else {
        return Frame::Other;
    };
    if value.get("method").and_then(|m| m.as_str()) == Some("eth_subscription") {
        return Frame::Head;
    }
    if value.get("id").and_then(|id| id.as_u64()) == Some(1) {
        if let Some(error) = value.get("error") {
            let message = error
                .get("message")
                .and_then(|m| m.as_str())
                .unwrap_or("unknown error");
            return Frame::Refused(message.chars().take(200).collect());
        }
        if value.get("result").is_some_and(|r| r.is_string()) {
            return Frame::Subscribed;
        }
    }
    Frame::Other
}

/// Error texts of the WebSocket library may repeat the URL, or any part of
/// it that holds an API key (path, query, user info): every one is replaced.
fn scrub(text: &str, url: &str) -> String {
    let secrets = match url.parse::<reqwest::Url>() {
        Ok(parsed) => crate::chain::secret_renderings(url, &parsed),
        Err(_) => vec![url.to_owned()],
    };
    crate::chain::scrub(text.to_owned(), &secrets, "<ws endpoint>")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_told_apart() {
        assert_eq!(
            classify(r#"{"jsonrpc":"2.0","id":1,"result":"0xabc"}"#),
            Frame::Subscribed
        );
        assert_eq!(
            classify(
                r#"{"jsonrpc":"2.0","method":"eth_subscription","params":{"subscription":"0xabc","result":{}}}"#
            ),
            Frame::Head
        );
        assert_eq!(
            classify(r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"no subs"}}"#),
            Frame::Refused("no subs".to_owned())
        );
        assert_eq!(classify("not json"), Frame::Other);
    }

    #[test]
    fn urls_are_scrubbed_from_errors() {
        let url = "wss://host.example/v2/SECRET123";
        let text = scrub(&format!("failed to connect to {url}: refused"), url);
        assert!(!text.contains("SECRET123"), "{text}");
        let partial = scrub("GET /v2/SECRET123 failed", url);
        assert!(!partial.contains("SECRET123"), "{partial}");
        let url = "wss://host.example?key=SECRET456";
        let text = scrub(
            "handshake to wss://host.example/?key=SECRET456 refused: SECRET456",
            url,
        );
        assert!(!text.contains("SECRET456"), "{text}");
    }
}
