//! Webhooks over their life: the lease fences an old holder, a private CA,
//! where a new webhook starts, and reload.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_taken_over_webhook_lease_refuses_the_old_holders_cursor_writes() {
    let db = TestDb::migrated().await;
    let key = WebhookKey {
        chain_id: 31337u64.into(),
        name: "hook".into(),
    };
    let (a, b) = (LeaseOwner::new("a", "i1"), LeaseOwner::new("b", "i2"));
    let timing = LeaseTiming {
        duration: Duration::from_millis(200),
        renew_interval: Duration::from_millis(50),
        clock_skew: Duration::ZERO,
        idle_release_after: Duration::from_secs(60),
    };
    let old = webhook_lease::acquire_or_renew(&db.pool, &key, &a, timing, Duration::ZERO, false)
        .await
        .expect("store")
        .expect("first holder");
    assert!(
        webhook_lease::acquire_or_renew(&db.pool, &key, &b, timing, Duration::ZERO, false)
            .await
            .expect("store")
            .is_none(),
        "a live lease is not taken"
    );
    let progress = |seq| Progress {
        cursor: Some(FeedCursor::new(1, seq)),
        ..Progress::default()
    };
    assert!(webhooks::commit(&db.pool, &key, old.token, &progress(1))
        .await
        .expect("store"));
    let new = eventually(Duration::from_secs(10), Duration::from_millis(20), || {
        let (pool, key, b) = (db.pool.clone(), key.clone(), b.clone());
        async move {
            webhook_lease::acquire_or_renew(&pool, &key, &b, timing, Duration::ZERO, false)
                .await
                .expect("store")
        }
    })
    .await;
    assert_eq!(new.token, old.token + 1);
    assert!(new.fresh);
    assert!(
        !webhooks::commit(&db.pool, &key, old.token, &progress(9))
            .await
            .expect("store"),
        "the old token is fenced"
    );
    let resume = webhooks::resume(&db.pool, &key).await.expect("store");
    assert_eq!(
        resume.cursor,
        FeedCursor::new(1, 1),
        "the fenced write changed nothing"
    );
    assert!(webhooks::commit(&db.pool, &key, new.token, &progress(2))
        .await
        .expect("store"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_https_receiver_is_reached_through_its_private_ca_and_refused_without_it() {
    let receiver = Receiver::always_ok().await;
    let ca = TestCa::new("webhook-ca");
    let upstream = receiver
        .url
        .trim_start_matches("http://")
        .trim_end_matches("/hook");
    let proxy = TlsProxy::start(&ca.server("receiver"), upstream).await;
    let url = format!("{}/hook", proxy.https_url());
    let hooks = [
        webhook(
            "trusted",
            &url,
            &format!("ca_file = \"{}\"", ca.ca_file.display()),
        ),
        webhook("untrusted", &url, "max_attempts = 2"),
    ]
    .concat();
    let scenario = scenario(&hooks).await;
    create(&scenario, 3, "t").await;
    wait_until(CONFIRMED_WITHIN, || async {
        receiver.delivered_for("trusted").len() == 3
    })
    .await;
    let view = eventually(CONFIRMED_WITHIN, Duration::from_millis(100), || async {
        let view = ops_webhooks(&scenario).await;
        find(&view, "untrusted")
            .is_some_and(|s| s["dead_letters"] == 3)
            .then_some(view)
    })
    .await;
    assert!(
        receiver
            .received()
            .iter()
            .all(|r| r.json["webhook"] == "trusted"),
        "no request passed TLS without the CA"
    );
    let error = status_of(&view, "untrusted")["last_error"]
        .as_str()
        .expect("an error")
        .to_owned();
    assert!(
        error.contains("connection failed") || error.contains("certificate"),
        "{error}"
    );
    scenario.node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_new_webhook_starts_at_the_end_of_the_feed_unless_told_to_replay_it() {
    std::env::set_var(SECRET_VAR, SECRET);
    let first =
        Scenario::single_node_on(&["--block-time", "0.2"], "finality = { confirmations = 1 }")
            .await;
    create(&first, 3, "before").await;
    first
        .db
        .wait_count(
            "SELECT count(*) FROM tx_completion WHERE state = 'CONFIRMED'",
            3,
        )
        .await;
    let Scenario { db, anvil, node } = first;
    node.stop().await;

    let receiver = Receiver::always_ok().await;
    let hooks = [
        // `webhook()` replays from the beginning; the default starts at the end.
        webhook("replay", &receiver.url, ""),
        webhook("fresh", &receiver.url, "").replace("start_at = \"beginning\"\n", ""),
    ]
    .concat();
    let node = TestNode::start(&config_toml(
        &db.url,
        &anvil.rpc_url(),
        "n1",
        &format!("finality = {{ confirmations = 1 }}\n{hooks}"),
    ))
    .await;
    wait_until(CONFIRMED_WITHIN, || async {
        db.count("SELECT count(*) FROM webhook_cursor").await == 2
    })
    .await;
    for i in 0..2 {
        let (status, body) = node
            .request(
                "POST",
                "/v1/transactions",
                Some(transfer(&format!("after{i}"))),
            )
            .await;
        assert_eq!(status, 202, "{body}");
    }
    let of = |name: &str| {
        receiver
            .delivered_for(name)
            .into_iter()
            .map(|r| r.json["request_id"].as_str().unwrap_or_default().to_owned())
            .collect::<Vec<_>>()
    };
    wait_until(CONFIRMED_WITHIN, || async {
        of("replay").len() == 5 && of("fresh").len() == 2
    })
    .await;
    assert!(
        of("fresh").iter().all(|id| id.starts_with("after")),
        "{:?}",
        of("fresh")
    );
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_reload_starts_added_webhooks_stops_removed_ones_and_refuses_a_missing_secret() {
    std::env::set_var(SECRET_VAR, SECRET);
    let receiver = Receiver::always_ok().await;
    let db = TestDb::migrated().await;
    let anvil = txmgr_testkit::Anvil::start_with(&["--block-time", "0.2"]).await;
    let path = std::env::temp_dir().join(format!("txmgr-hooks-{}.toml", uuid::Uuid::new_v4()));
    let config = |hooks: &str| {
        config_toml(
            &db.url,
            &anvil.rpc_url(),
            "n1",
            &format!("finality = {{ confirmations = 1 }}\n{hooks}"),
        )
    };
    std::fs::write(&path, config(&webhook("old", &receiver.url, ""))).expect("config file");
    let node = TestNode::start_file(&path).await;
    wait_until(CONFIRMED_WITHIN, || async {
        db.count("SELECT count(*) FROM webhook_cursor WHERE webhook = 'old' AND expires_at > now()")
            .await
            == 1
    })
    .await;

    // A webhook whose secret variable is unset: the reload is refused whole.
    let unset = webhook("new", &receiver.url, "").replace(SECRET_VAR, "TXMGR_TEST_UNSET_SECRET");
    std::fs::write(&path, config(&unset)).expect("config file");
    let (status, body) = node.request("POST", "/v1/ops/reload", None).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["field"], "webhooks[0].secret_env", "{body}");

    std::fs::write(&path, config(&webhook("new", &receiver.url, ""))).expect("config file");
    let (status, report) = node.request("POST", "/v1/ops/reload", None).await;
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["webhooks"], serde_json::json!(["new"]), "{report}");
    // The removed webhook's lease is released; the added one delivers.
    wait_until(CONFIRMED_WITHIN, || async {
        db.count("SELECT count(*) FROM webhook_cursor WHERE webhook = 'old' AND expires_at > now()")
            .await
            == 0
    })
    .await;
    create_on(&node, 2, "r").await;
    wait_until(CONFIRMED_WITHIN, || async {
        receiver.delivered_for("new").len() == 2
    })
    .await;
    assert!(
        receiver
            .delivered()
            .iter()
            .all(|r| r.json["webhook"] == "new"),
        "nothing reached the removed webhook"
    );
    node.stop().await;
    let _ = std::fs::remove_file(&path);
}
