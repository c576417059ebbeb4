//! The node-wide ingress bound holds over every chain: the chains share the
//! node's ingress writer, so `[node] ingress_max_items` counts the creates
//! waiting for every chain together (it once bounded each chain alone).

use std::time::Duration;

use crate::{
    bounded::call,
    common::{node::TestNode, wait_until, Anvil, TestDb, DEV_ADDRESS_0},
    multi_chain::{on_chain, two_chains_toml, BASE_ID, OTHER_KEY, OTHER_KEY_VAR},
};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_ingress_item_cap_bounds_the_node_over_every_chain() {
    std::env::set_var(OTHER_KEY_VAR, OTHER_KEY);
    let db = TestDb::migrated().await;
    let local = Anvil::start_with(&["--no-mining"]).await;
    let base = Anvil::start_on_chain(BASE_ID, &["--no-mining"]).await;
    let toml = two_chains_toml(&db.url, &local, &base)
        .replace("[node]\n", "[node]\ningress_max_items = 3\n");
    let node = TestNode::start(&toml).await;
    let dev = DEV_ADDRESS_0.to_lowercase();
    // The writer waits on a lock the test holds: admitted creates queue up.
    let mut lock = db.pool.begin().await.expect("begin");
    sqlx::query("LOCK TABLE managed_tx IN SHARE MODE")
        .execute(&mut *lock)
        .await
        .expect("lock");
    let held = [(31337, "l1"), (31337, "l2"), (BASE_ID, "b1")];
    let waiting: Vec<_> = held
        .iter()
        .map(|(chain, id)| {
            let (app, body) = (node.app.clone(), on_chain(Some(*chain), &dev, id));
            tokio::spawn(async move { call(&app, "POST", "/v1/transactions", Some(body)).await })
        })
        .collect();
    wait_until(Duration::from_secs(10), || async {
        let depth: usize = node
            .chains
            .iter()
            .flat_map(|chain| chain.engine.handles())
            .map(|handle| handle.ingress_depth())
            .sum();
        depth == held.len()
    })
    .await;
    // Three wait over both chains: a fourth, on either chain, is refused.
    for (chain, id) in [(BASE_ID, "over-base"), (31337, "over-local")] {
        let reply = call(
            &node.app,
            "POST",
            "/v1/transactions",
            Some(on_chain(Some(chain), &dev, id)),
        )
        .await;
        assert_eq!(reply.status, 503, "{}", reply.json);
        assert_eq!(reply.json["error"]["code"], "busy", "{}", reply.json);
    }
    lock.rollback().await.expect("unlock");
    for task in waiting {
        let reply = task.await.expect("create task");
        assert_eq!(
            reply.status, 202,
            "an admitted create was lost: {}",
            reply.json
        );
    }
    assert_eq!(db.count("SELECT count(*) FROM managed_tx").await, 3);
    node.stop().await;
}
