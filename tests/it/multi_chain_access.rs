//! Several chains and who sees what: a token scoped to one chain, and a
//! webhook with a `chains` filter (one cursor over every chain).

use crate::{
    common::{node::TestNode, Anvil, TestDb, DEV, DEV_ADDRESS_0},
    multi_chain::{on_chain, two_chains_toml, BASE_ID, OTHER_KEY, OTHER_KEY_VAR},
};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_token_scoped_to_one_chain_cannot_use_its_submitter_on_another() {
    use txmgr::http::auth::token_hash_hex;
    std::env::set_var(OTHER_KEY_VAR, OTHER_KEY);
    let db = TestDb::migrated().await;
    let local = Anvil::start().await;
    let base = Anvil::start_on_chain(BASE_ID, &[]).await;
    let dev = DEV_ADDRESS_0.to_lowercase();
    let toml = format!(
        r#"{}
[[auth.tokens]]
name = "base-dev"
role = "client"
sha256 = "{}"
submitters = ["base:{dev}"]
[[auth.tokens]]
name = "dev-by-id"
role = "client"
sha256 = "{}"
submitters = ["31337:{dev}"]
"#,
        two_chains_toml(&db.url, &local, &base),
        token_hash_hex("base-dev-token"),
        token_hash_hex("dev-by-id-token"),
    );
    let node = TestNode::start(&toml).await;
    let create = |token: &'static str, chain: u64, id: &'static str| {
        let node = &node;
        async move {
            node.request_as(
                Some(token),
                "POST",
                "/v1/transactions",
                Some(on_chain(Some(chain), DEV, id)),
            )
            .await
        }
    };
    let (status, body) = create("base-dev-token", BASE_ID, "b1").await;
    assert_eq!(status, 202, "{body}");
    let (status, body) = create("base-dev-token", 31337, "l1").await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["error"]["field"], "submitter", "{body}");
    let (status, body) = create("dev-by-id-token", 31337, "l1").await;
    assert_eq!(status, 202, "{body}");
    let (status, body) = create("dev-by-id-token", BASE_ID, "b2").await;
    assert_eq!(status, 403, "{body}");
    // Each sees only its chain's transaction of the shared key.
    let local_tx = body_tx(&db, 31337).await;
    let (status, _) = node
        .request_as(
            Some("base-dev-token"),
            "GET",
            &format!("/v1/transactions/{local_tx}"),
            None,
        )
        .await;
    assert_eq!(status, 404, "another chain's transaction is absent to it");
    // A listing without a chain filter shows the chains the token may use.
    let (status, page) = node
        .request_as(
            Some("base-dev-token"),
            "GET",
            &format!("/v1/transactions?submitter={DEV}"),
            None,
        )
        .await;
    assert_eq!(status, 200, "{page}");
    let chains: Vec<&serde_json::Value> = page["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|item| &item["chain_id"])
        .collect();
    assert_eq!(chains, vec![&serde_json::json!(BASE_ID)], "{page}");
    let (status, _) = node
        .request_as(
            Some("base-dev-token"),
            "GET",
            &format!("/v1/transactions?submitter={DEV}&chain_id=31337"),
            None,
        )
        .await;
    assert_eq!(status, 403, "naming the other chain is refused");
    node.stop().await;
}

/// The id of the one intent stored on `chain_id`.
async fn body_tx(db: &TestDb, chain_id: i64) -> uuid::Uuid {
    sqlx::query_scalar("SELECT tx_id FROM managed_tx WHERE chain_id = $1")
        .bind(chain_id)
        .fetch_one(&db.pool)
        .await
        .expect("one intent on the chain")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_webhook_with_a_chains_filter_gets_only_those_chains_and_one_cursor_covers_all() {
    use crate::common::{receiver::Receiver, wait_until};
    const SECRET_VAR: &str = "TXMGR_TEST_MULTI_CHAIN_HOOK_SECRET";
    std::env::set_var(OTHER_KEY_VAR, OTHER_KEY);
    std::env::set_var(SECRET_VAR, "multi-chain-secret");
    let db = TestDb::migrated().await;
    let local = Anvil::start_with(&["--block-time", "0.2"]).await;
    let base = Anvil::start_on_chain(BASE_ID, &["--block-time", "0.2"]).await;
    let only_base = Receiver::always_ok().await;
    let every = Receiver::always_ok().await;
    let hook = |name: &str, url: &str, extra: &str| {
        format!(
            "\n[[webhooks]]\nname = \"{name}\"\nurl = \"{url}\"\nsecret_env = \"{SECRET_VAR}\"\n\
             backoff_initial = \"50ms\"\n{extra}"
        )
    };
    let toml = format!(
        "{}{}{}",
        two_chains_toml(&db.url, &local, &base),
        hook(
            "base-only",
            &only_base.url,
            &format!("chains = [\"{BASE_ID}\"]")
        ),
        hook("every-chain", &every.url, ""),
    );
    let node = TestNode::start(&toml).await;
    for i in 0..5 {
        for chain in [31337, BASE_ID] {
            let body = on_chain(Some(chain), DEV, &format!("w{i}"));
            let (status, answer) = node.request("POST", "/v1/transactions", Some(body)).await;
            assert_eq!(status, 202, "{answer}");
        }
    }
    wait_until(std::time::Duration::from_secs(30), || async {
        only_base.delivered().len() >= 5 && every.delivered().len() >= 10
    })
    .await;
    let chains_of = |received: &Receiver| -> Vec<u64> {
        received
            .delivered()
            .iter()
            .filter_map(|r| r.json["chain_id"].as_u64())
            .collect()
    };
    assert_eq!(chains_of(&only_base), vec![BASE_ID; 5]);
    let mut both = chains_of(&every);
    both.sort_unstable();
    assert_eq!(both, [vec![BASE_ID; 5], vec![31337; 5]].concat());
    // One cursor per webhook, not one per chain.
    let cursors = db.count("SELECT count(*) FROM webhook_cursor").await;
    assert_eq!(cursors, 2);
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_webhooks_lag_counts_every_chains_events() {
    use crate::common::{receiver::Receiver, wait_until};
    const SECRET_VAR: &str = "TXMGR_TEST_MULTI_CHAIN_LAG_SECRET";
    std::env::set_var(OTHER_KEY_VAR, OTHER_KEY);
    std::env::set_var(SECRET_VAR, "lag-secret");
    let db = TestDb::migrated().await;
    let local = Anvil::start_with(&["--block-time", "0.2"]).await;
    let base = Anvil::start_on_chain(BASE_ID, &["--block-time", "0.2"]).await;
    // The receiver refuses everything: nothing is delivered, all is lag.
    let refusing = Receiver::start(Box::new(|_| (500, Some(3600)))).await;
    let toml = format!(
        "{}\n[[webhooks]]\nname = \"lagging\"\nurl = \"{}\"\nsecret_env = \"{SECRET_VAR}\"\n",
        two_chains_toml(&db.url, &local, &base),
        refusing.url,
    );
    let node = TestNode::start(&toml).await;
    // Events on `local`: not the chain the webhook's rows are keyed by.
    for i in 0..3 {
        let body = on_chain(Some(31337), DEV, &format!("l{i}"));
        let (status, answer) = node.request("POST", "/v1/transactions", Some(body)).await;
        assert_eq!(status, 202, "{answer}");
    }
    db.wait_count(
        "SELECT count(*) FROM managed_tx WHERE state = 'CONFIRMED'",
        3,
    )
    .await;
    wait_until(std::time::Duration::from_secs(20), || async {
        let (_, view) = node.request("GET", "/v1/ops/webhooks", None).await;
        view["webhooks"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|w| w["name"] == "lagging" && w["lag_events"].as_i64() >= Some(3))
    })
    .await;
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_chain_scoped_ops_token_sees_only_that_chains_dead_letters() {
    use crate::common::{receiver::Receiver, wait_until};
    use txmgr::http::auth::token_hash_hex;
    const SECRET_VAR: &str = "TXMGR_TEST_MULTI_CHAIN_DEAD_SECRET";
    std::env::set_var(OTHER_KEY_VAR, OTHER_KEY);
    std::env::set_var(SECRET_VAR, "dead-secret");
    let db = TestDb::migrated().await;
    let local = Anvil::start_with(&["--block-time", "0.2"]).await;
    let base = Anvil::start_on_chain(BASE_ID, &["--block-time", "0.2"]).await;
    // Refused at once, no retry: every event becomes a dead letter.
    let refusing = Receiver::start(Box::new(|_| (400, None))).await;
    let dev = DEV_ADDRESS_0.to_lowercase();
    let toml = format!(
        "{}\n[[webhooks]]\nname = \"dead\"\nurl = \"{}\"\nsecret_env = \"{SECRET_VAR}\"\nmax_attempts = 1\n\
         [[auth.tokens]]\nname = \"ops\"\nrole = \"ops\"\nsha256 = \"{}\"\n\
         [[auth.tokens]]\nname = \"ops-base\"\nrole = \"ops\"\nsha256 = \"{}\"\nsubmitters = [\"base:{dev}\"]\n",
        two_chains_toml(&db.url, &local, &base),
        refusing.url,
        token_hash_hex("ops-all"),
        token_hash_hex("ops-base"),
    );
    let node = TestNode::start(&toml).await;
    for chain in [31337, BASE_ID] {
        let body = on_chain(Some(chain), DEV, "d");
        let (status, answer) = node
            .request_as(Some("ops-all"), "POST", "/v1/transactions", Some(body))
            .await;
        assert_eq!(status, 202, "{answer}");
    }
    let dead = |token: &'static str| {
        let node = &node;
        async move {
            let (_, view) = node
                .request_as(Some(token), "GET", "/v1/ops/webhooks", None)
                .await;
            view["dead_letters"].as_array().map_or(0, Vec::len)
        }
    };
    wait_until(std::time::Duration::from_secs(30), || async {
        dead("ops-all").await == 2
    })
    .await;
    assert_eq!(dead("ops-base").await, 1, "only base's event");
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_webhook_keeps_its_cursor_when_a_chain_named_first_is_added() {
    use crate::common::{receiver::Receiver, wait_until};
    const SECRET_VAR: &str = "TXMGR_TEST_MULTI_CHAIN_KEY_SECRET";
    std::env::set_var(OTHER_KEY_VAR, OTHER_KEY);
    std::env::set_var(SECRET_VAR, "key-secret");
    let db = TestDb::migrated().await;
    let local = Anvil::start_with(&["--block-time", "0.2"]).await;
    let base = Anvil::start_on_chain(BASE_ID, &["--block-time", "0.2"]).await;
    let added = Anvil::start_on_chain(4244, &["--block-time", "0.2"]).await;
    let receiver = Receiver::always_ok().await;
    let hook = format!(
        "\n[[webhooks]]\nname = \"steady\"\nurl = \"{}\"\nsecret_env = \"{SECRET_VAR}\"\n\
         events = [\"CONFIRMED\"]\nstart_at = \"beginning\"\n",
        receiver.url
    );
    let first = format!("{}{hook}", two_chains_toml(&db.url, &local, &base));
    let delivered = |n: usize| {
        let receiver = &receiver;
        async move {
            let ids: std::collections::HashSet<String> = receiver
                .delivered()
                .iter()
                .filter_map(|r| r.json["tx_id"].as_str().map(str::to_owned))
                .collect();
            ids.len() >= n
        }
    };
    let node = TestNode::start(&first).await;
    for i in 0..2 {
        let body = on_chain(Some(31337), DEV, &format!("before{i}"));
        let (status, answer) = node.request("POST", "/v1/transactions", Some(body)).await;
        assert_eq!(status, 202, "{answer}");
    }
    wait_until(std::time::Duration::from_secs(30), || delivered(2)).await;
    node.stop().await;

    // `aaa` sorts before `base`: the first chain is another one now.
    let second = first.replace(
        "[chains.base]",
        &format!(
            "[chains.aaa]\nrpc_url = \"{}\"\nchain_id = 4244\n[chains.base]",
            added.rpc_url()
        ),
    );
    let node = TestNode::start(&second).await;
    let body = on_chain(Some(31337), DEV, "after");
    let (status, answer) = node.request("POST", "/v1/transactions", Some(body)).await;
    assert_eq!(status, 202, "{answer}");
    wait_until(std::time::Duration::from_secs(30), || delivered(3)).await;
    // Still the one cursor, keyed as before: nothing was replayed.
    let keys: Vec<i64> = sqlx::query_scalar("SELECT chain_id FROM webhook_cursor")
        .fetch_all(&db.pool)
        .await
        .expect("cursors");
    assert_eq!(keys, vec![BASE_ID as i64]);
    let mut times = std::collections::HashMap::new();
    for r in receiver.delivered() {
        *times.entry(r.delivery_id).or_insert(0) += 1;
    }
    assert!(times.values().all(|n| *n == 1), "replayed: {times:?}");
    node.stop().await;
}
