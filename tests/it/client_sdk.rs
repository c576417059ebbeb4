//! The Rust client (`txmgr-client`) against a real `txmgr run` and anvil
//! (issue 49): a create whose answer is lost while the daemon is killed and
//! restarted lands exactly once; a 429 is waited out (and handed back when
//! its `Retry-After` is too long); a 4xx comes back typed; `wait_final`
//! gives CONFIRMED and FAILED_FINAL; `wait_final_many` reads the feed; the
//! follower resumes from a stored cursor without a gap or a repeat; and the
//! webhook verifier accepts the daemon's real deliveries and refuses a
//! changed body, a wrong secret and an old timestamp.

use std::{
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::Duration,
};

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
    sync::oneshot,
};
use txmgr_client::{
    api::{CreateBody, ErrorCode, FeedEvent, TxState},
    webhook, Client, Error, FeedQuery, Flow, ListQuery, RetryPolicy,
};

use crate::common::{
    daemon::{key_var, Daemon},
    free_port,
    node::{config_toml, token_toml, KEY_VAR},
    parse_quantity,
    receiver::Receiver,
    wait_until, Anvil, TestDb, DEV_ADDRESS_0,
};

pub(crate) const CLIENT_TOKEN: &str = "client-sdk-token";
pub(crate) const OPS_TOKEN: &str = "client-sdk-ops";
const SLOW_TOKEN: &str = "client-sdk-slow";
const WEBHOOK_SECRET_VAR: &str = "TXMGR_CLIENT_SDK_WEBHOOK_SECRET";
const WEBHOOK_SECRET: &str = "client-sdk-webhook-secret";
const RECIPIENT: &str = "0x70997970c51812dc3a010c7d01b50e0d17dc79c8";
/// PUSH1 0 PUSH1 0 REVERT: every call reverts.
const REVERTER_CODE: &str = "0x60006000fd";
const REVERTER: &str = "0x00000000000000000000000000000000000ba11d";

/// One daemon serving dev key 0 with final-at-inclusion receipts, three
/// tokens (client, a slow client, ops) and, when given, a webhook.
pub(crate) fn daemon_config(db: &TestDb, anvil: &Anvil, port: u16, hook: Option<&str>) -> String {
    let base = config_toml(
        &db.url,
        &anvil.rpc_url(),
        "sdk-1",
        "finality = { confirmations = 1 }\nresubmit_interval = \"1s\"",
    )
    .replace(
        &format!("env = \"{KEY_VAR}\""),
        &format!("env = \"{}\"", key_var(0)),
    );
    let mut slow = token_toml("slow", "client", SLOW_TOKEN, &[]);
    slow.push_str("rate = { creates_per_second = 0.5, burst = 1 }\n");
    let hook = hook
        .map(|url| {
            format!(
                "[[webhooks]]\nname = \"sdk\"\nurl = \"{url}\"\nsecret_env = \"{WEBHOOK_SECRET_VAR}\"\n\
                 events = [\"CONFIRMED\", \"FAILED_FINAL\"]\nstart_at = \"beginning\"\n\
                 backoff_initial = \"100ms\"\nbackoff_max = \"500ms\"\n"
            )
        })
        .unwrap_or_default();
    format!(
        "{base}\n[http]\nlisten = \"127.0.0.1:{port}\"\n{}{slow}{}{hook}",
        token_toml("client", "client", CLIENT_TOKEN, &[]),
        token_toml("ops", "ops", OPS_TOKEN, &[]),
    )
}

fn transfer(request_id: Option<&str>) -> CreateBody {
    CreateBody {
        submitter: DEV_ADDRESS_0.to_lowercase(),
        to: Some(RECIPIENT.into()),
        value: Some(1_000u128.into()),
        gas_limit: Some(21_000),
        request_id: request_id.map(str::to_owned),
        ..CreateBody::default()
    }
}

fn client(url: &str, token: &str) -> Client {
    Client::builder(url)
        .token(token)
        .retry(RetryPolicy {
            max_attempts: 60,
            max_backoff: Duration::from_millis(500),
            ..RetryPolicy::default()
        })
        .build()
        .expect("client")
}

async fn nonce_on_chain(anvil: &Anvil) -> u64 {
    let count = anvil
        .rpc(
            "eth_getTransactionCount",
            serde_json::json!([DEV_ADDRESS_0, "latest"]),
        )
        .await;
    parse_quantity(&count)
}

/// A proxy in front of the daemon: the first request is forwarded and its
/// answer read, then `answered` fires and the client's connection is closed
/// without the answer; later connections are relayed as they are.
async fn losing_proxy(daemon_port: u16) -> (u16, oneshot::Receiver<()>, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let (answered, fired) = oneshot::channel();
    let connections = Arc::new(AtomicUsize::new(0));
    let counter = connections.clone();
    tokio::spawn(async move {
        let mut answered = Some(answered);
        loop {
            let Ok((mut client, _)) = listener.accept().await else {
                return;
            };
            counter.fetch_add(1, Ordering::SeqCst);
            let first = answered.take();
            tokio::spawn(async move {
                let Ok(mut upstream) = TcpStream::connect(("127.0.0.1", daemon_port)).await else {
                    return; // the daemon is down: the client sees a reset
                };
                match first {
                    None => {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
                    }
                    Some(answered) => {
                        let Some(request) = read_request(&mut client).await else {
                            return;
                        };
                        if upstream.write_all(&request).await.is_err() {
                            return;
                        }
                        let mut answer = [0u8; 4096];
                        let _ = upstream.read(&mut answer).await;
                        let _ = answered.send(());
                        // Dropped without relaying the answer.
                    }
                }
            });
        }
    });
    (port, fired, connections)
}

/// Polls `read` until it answers `Some` (the feed's end once a row is
/// visible below the horizon).
async fn wait_until_some<F, Fut>(read: F) -> String
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = txmgr_client::Result<Option<String>>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(cursor) = read().await.expect("feed end") {
            return cursor;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the feed stayed empty"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// One whole HTTP/1.1 request: the head and `content-length` bytes of body.
async fn read_request(stream: &mut TcpStream) -> Option<Vec<u8>> {
    let mut request = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        let n = stream.read(&mut chunk).await.ok().filter(|n| *n > 0)?;
        request.extend_from_slice(&chunk[..n]);
        let Some(head_end) = request.windows(4).position(|w| w == b"\r\n\r\n") else {
            continue;
        };
        let head = String::from_utf8_lossy(&request[..head_end]).to_ascii_lowercase();
        let length = head
            .lines()
            .find_map(|line| line.strip_prefix("content-length:"))
            .and_then(|value| value.trim().parse::<usize>().ok())
            .unwrap_or(0);
        if request.len() >= head_end + 4 + length {
            return Some(request);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_whose_answer_is_lost_across_a_daemon_kill_lands_once_and_confirms() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start().await;
    let port = free_port();
    let mut daemon = Daemon::start("sdk-1", port, &daemon_config(&db, &anvil, port, None)).await;
    daemon.ready(&reqwest::Client::new()).await;
    let (proxy_port, answered, connections) = losing_proxy(port).await;
    let txmgr = client(&format!("http://127.0.0.1:{proxy_port}"), CLIENT_TOKEN);

    // No request id given: the client makes one and keeps it for its retries.
    let create = tokio::spawn({
        let txmgr = txmgr.clone();
        async move { txmgr.create(transfer(None)).await }
    });
    answered.await.expect("the first create reached the daemon");
    daemon.kill().await;
    daemon.restart();
    let created = create
        .await
        .expect("task")
        .expect("create lands after the restart");
    assert!(
        created.replayed,
        "the first try was stored: the retry is a replay"
    );
    assert!(
        connections.load(Ordering::SeqCst) >= 2,
        "the client retried"
    );
    let request_id = created
        .body
        .request_id
        .clone()
        .expect("a generated request id");

    let direct = client(&daemon.base(), CLIENT_TOKEN);
    let page = direct
        .list(&ListQuery {
            submitter: DEV_ADDRESS_0.to_lowercase(),
            ..ListQuery::default()
        })
        .await
        .expect("list");
    let same: Vec<_> = page
        .items
        .iter()
        .filter(|tx| tx.request_id.as_deref() == Some(&request_id))
        .collect();
    assert_eq!(same.len(), 1, "exactly one intent holds the request id");
    assert_eq!(page.items.len(), 1);
    let tx = direct
        .wait_final(created.body.tx_id, Duration::from_secs(60))
        .await
        .expect("final");
    assert_eq!(tx.state, TxState::Confirmed);
    assert_eq!(tx.receipt.as_ref().and_then(|r| r.status), Some(1));
    assert_eq!(nonce_on_chain(&anvil).await, 1, "sent once");
    let by_id = direct
        .get_by_request_id(&DEV_ADDRESS_0.to_lowercase(), &request_id, None)
        .await
        .expect("by request id");
    assert_eq!(by_id.tx_id, tx.tx_id);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limits_are_waited_out_and_refusals_come_back_typed() {
    let db = TestDb::migrated().await;
    let anvil = Anvil::start().await;
    let port = free_port();
    let daemon = Daemon::start("sdk-1", port, &daemon_config(&db, &anvil, port, None)).await;
    daemon.ready(&reqwest::Client::new()).await;
    let slow = client(&daemon.base(), SLOW_TOKEN);

    // burst 1, then one per 2 s: the second create waits out its 429.
    let first = slow.create(transfer(Some("rate-1"))).await.expect("first");
    let second = slow
        .create(transfer(Some("rate-2")))
        .await
        .expect("second, after Retry-After");
    assert_ne!(first.body.tx_id, second.body.tx_id);
    // With no patience for Retry-After the 429 is the caller's.
    let impatient = slow.with_retry(RetryPolicy {
        max_retry_after: Duration::ZERO,
        ..RetryPolicy::default()
    });
    match impatient.create(transfer(Some("rate-3"))).await {
        Err(Error::Api {
            status: 429,
            detail,
            retry_after: Some(after),
            request_id,
        }) => {
            assert_eq!(detail.code, ErrorCode::RateLimited);
            assert!(after >= Duration::from_secs(1), "{after:?}");
            assert_eq!(request_id.as_deref(), Some("rate-3"));
        }
        other => panic!("expected 429 rate_limited, got {other:?}"),
    }

    let txmgr = client(&daemon.base(), CLIENT_TOKEN);
    let mut bad = transfer(Some("bad-value"));
    bad.value = Some("-1".into());
    let error = txmgr.create(bad).await.expect_err("refused");
    assert_eq!(error.code(), Some(ErrorCode::InvalidRequest));
    assert_eq!(error.field(), Some("value"));
    assert_eq!(error.status(), Some(400));
    // The same request id with another body: 409 naming the holder.
    let mut other = transfer(Some("rate-1"));
    other.value = Some("2".into());
    match txmgr.create(other).await {
        Err(Error::Api {
            status: 409,
            detail,
            ..
        }) => {
            assert_eq!(detail.code, ErrorCode::IdempotencyConflict);
            assert_eq!(detail.tx_id, Some(first.body.tx_id));
        }
        other => panic!("expected 409, got {other:?}"),
    }
    let unknown = Client::builder(daemon.base())
        .token("wrong")
        .build()
        .expect("client");
    let error = unknown.get(first.body.tx_id).await.expect_err("401");
    assert_eq!(error.code(), Some(ErrorCode::Unauthorized));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waits_end_in_the_final_state_and_the_feed_and_webhooks_agree() {
    std::env::set_var(WEBHOOK_SECRET_VAR, WEBHOOK_SECRET);
    let receiver = Receiver::always_ok().await;
    let db = TestDb::migrated().await;
    let anvil = Anvil::start().await;
    anvil
        .rpc(
            "anvil_setCode",
            serde_json::json!([REVERTER, REVERTER_CODE]),
        )
        .await;
    let port = free_port();
    let config = daemon_config(&db, &anvil, port, Some(&receiver.url));
    let daemon = Daemon::start("sdk-1", port, &config).await;
    daemon.ready(&reqwest::Client::new()).await;
    let txmgr = client(&daemon.base(), CLIENT_TOKEN);

    // An earlier completion: `feed_end` starts after it.
    let earlier = txmgr
        .create(transfer(Some("earlier")))
        .await
        .expect("create");
    txmgr
        .wait_final(earlier.body.tx_id, Duration::from_secs(60))
        .await
        .expect("final");
    let end = wait_until_some(|| txmgr.feed_end()).await;
    let start = txmgr
        .completions(&FeedQuery {
            after: Some("end".into()),
            ..FeedQuery::default()
        })
        .await
        .expect("feed from its end");
    assert!(start.items.is_empty(), "nothing after the end");
    assert_eq!(start.next_after.as_deref(), Some(end.as_str()));
    let ok = txmgr.create(transfer(Some("ok-1"))).await.expect("create");
    let mut call = transfer(Some("revert-1"));
    call.to = Some(REVERTER.into());
    call.gas_limit = Some(50_000);
    let reverting = txmgr.create(call).await.expect("create");
    let confirmed = txmgr
        .wait_final(ok.body.tx_id, Duration::from_secs(60))
        .await
        .expect("final");
    assert_eq!(confirmed.state, TxState::Confirmed);
    let failed = txmgr
        .wait_final(reverting.body.tx_id, Duration::from_secs(60))
        .await
        .expect("final");
    assert_eq!(failed.state, TxState::FailedFinal);
    assert_eq!(failed.receipt.as_ref().and_then(|r| r.status), Some(0));
    let ids = [ok.body.tx_id, reverting.body.tx_id];
    let rows = txmgr
        .wait_final_many(&ids, start.next_after.clone(), Duration::from_secs(60))
        .await
        .expect("both final by the feed");
    let events: Vec<_> = rows.iter().map(|row| (row.tx_id, row.state)).collect();
    assert_eq!(
        events,
        [
            (Some(ok.body.tx_id), FeedEvent::Confirmed),
            (Some(reverting.body.tx_id), FeedEvent::FailedFinal)
        ]
    );
    // An intent that cannot be final in time: the timeout names it.
    let pending = uuid::Uuid::now_v7();
    match txmgr
        .wait_final_many(
            &[pending],
            start.next_after.clone(),
            Duration::from_millis(300),
        )
        .await
    {
        Err(Error::WaitTimeout { pending: left, .. }) => assert_eq!(left, [pending]),
        other => panic!("expected a timeout, got {other:?}"),
    }

    // Follow, stop half way storing the cursor, create more, resume.
    let mut stored = start.next_after.clone();
    let mut seen = Vec::new();
    txmgr
        .follow(
            FeedQuery {
                after: stored.clone(),
                limit: Some(1),
                ..FeedQuery::default()
            },
            |page| {
                seen.extend(page.items.iter().map(|row| row.cursor.clone()));
                stored.clone_from(&page.next_after);
                std::future::ready(Flow::Stop)
            },
        )
        .await
        .expect("follow");
    assert_eq!(seen.len(), 1);
    let more = txmgr.create(transfer(Some("ok-2"))).await.expect("create");
    txmgr
        .wait_final(more.body.tx_id, Duration::from_secs(60))
        .await
        .expect("final");
    txmgr
        .follow(
            FeedQuery {
                after: stored.clone(),
                ..FeedQuery::default()
            },
            |page| {
                seen.extend(page.items.iter().map(|row| row.cursor.clone()));
                let done = seen.len() >= 3;
                std::future::ready(if done { Flow::Stop } else { Flow::Continue })
            },
        )
        .await
        .expect("follow");
    let everything = txmgr
        .completions(&FeedQuery {
            after: start.next_after.clone(),
            ..FeedQuery::default()
        })
        .await
        .expect("feed");
    let all: Vec<_> = everything
        .items
        .iter()
        .map(|row| row.cursor.clone())
        .collect();
    assert_eq!(seen, all, "no gap, no repeat, in feed order");

    // The daemon's real deliveries verify; tampering does not.
    wait_until(Duration::from_secs(30), || async {
        receiver.delivered().len() >= 4
    })
    .await;
    for delivery in receiver.delivered() {
        let event = webhook::verify_event(
            WEBHOOK_SECRET.as_bytes(),
            &delivery.signature,
            &delivery.body,
            Duration::from_secs(300),
        )
        .expect("a real delivery verifies");
        assert_eq!(event.id, delivery.delivery_id);
        let mut changed = delivery.body.clone();
        changed.push(b' ');
        assert_eq!(
            webhook::verify(
                WEBHOOK_SECRET.as_bytes(),
                &delivery.signature,
                &changed,
                Duration::from_secs(300)
            ),
            Err(webhook::WebhookError::SignatureMismatch)
        );
        assert_eq!(
            webhook::verify(
                b"another secret",
                &delivery.signature,
                &delivery.body,
                Duration::from_secs(300)
            ),
            Err(webhook::WebhookError::SignatureMismatch)
        );
        let later = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock")
            .as_secs()
            + 3_600;
        assert!(matches!(
            webhook::verify_at(
                WEBHOOK_SECRET.as_bytes(),
                &delivery.signature,
                &delivery.body,
                Duration::from_secs(300),
                later
            ),
            Err(webhook::WebhookError::TimestampOutOfTolerance { .. })
        ));
    }
}
