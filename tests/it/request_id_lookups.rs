//! The ops transaction view finds a request id only with its submitter
//! (README "Operations", issue 47 item 7): another client's newer intent
//! under the same request id cannot shadow the one an operator looks for.

use serde_json::json;

use crate::{
    common::{node::TestNode, Anvil, TestDb, DEV},
    multi_chain::{OTHER, OTHER_KEY, OTHER_KEY_VAR},
};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_request_id_names_a_transaction_only_with_its_submitter() {
    std::env::set_var(OTHER_KEY_VAR, OTHER_KEY);
    let db = TestDb::migrated().await;
    let anvil = Anvil::start().await;
    let other = format!(
        "[submitters.\"{OTHER}\"]\nsigner = {{ kind = \"env\", env = \"{OTHER_KEY_VAR}\" }}\n"
    );
    let toml = crate::common::node::config_toml(&db.url, &anvil.rpc_url(), "n1", "") + &other;
    let node = TestNode::start(&toml).await;

    // The victim's order-42, then another client's (newer) order-42.
    let mut ids = Vec::new();
    for submitter in [DEV, OTHER] {
        let (status, body) = node
            .request(
                "POST",
                "/v1/transactions",
                Some(json!({"submitter": submitter, "to": DEV, "value": "1", "request_id": "order-42"})),
            )
            .await;
        assert_eq!(status, 202, "{body}");
        ids.push(body["tx_id"].as_str().expect("tx_id").to_owned());
    }

    // Without the submitter: refused, naming what to add.
    let (status, body) = node
        .request("GET", "/v1/ops/transactions/order-42", None)
        .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["field"], "submitter", "{body}");

    // With it (and the chain, optional with one chain): that submitter's.
    for (submitter, tx_id) in [(DEV, &ids[0]), (OTHER, &ids[1])] {
        for query in [
            format!("submitter={submitter}"),
            format!("submitter={submitter}&chain_id=31337"),
        ] {
            let path = format!("/v1/ops/transactions/order-42?{query}");
            let (status, body) = node.request("GET", &path, None).await;
            assert_eq!(status, 200, "{path}: {body}");
            assert_eq!(
                body["transaction"]["tx_id"],
                tx_id.as_str(),
                "{path}: {body}"
            );
        }
    }
    let (status, body) = node
        .request(
            "GET",
            "/v1/ops/transactions/order-43?submitter=0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc",
            None,
        )
        .await;
    assert_eq!(status, 404, "{body}");
    // A chain id no stored row can carry (above PostgreSQL's BIGINT): no
    // such transaction, not a 500 (schemathesis found it).
    let (status, body) = node
        .request(
            "GET",
            &format!("/v1/ops/transactions/order-42?submitter={DEV}&chain_id=9223372036854775808"),
            None,
        )
        .await;
    assert_eq!(status, 404, "{body}");
    // A parameter the view does not know is refused, naming it.
    let (status, body) = node
        .request(
            "GET",
            &format!("/v1/ops/transactions/{}?submiter={DEV}", ids[0]),
            None,
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["field"], "submiter", "{body}");
    node.stop().await;
}
