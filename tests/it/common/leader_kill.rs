//! One scenario several tests share: intents sent to two daemon processes
//! of one submitter, its leader SIGKILLed mid-stream, the rest sent to the
//! survivor — then each intent CONFIRMED once, nonces without a gap, and
//! the chain's nonce equal to the count (nothing sent twice).

use std::time::Duration;

use serde_json::Value;
use txmgr_client::{api::CreateBody, api::TxState, Client};

use super::{daemon::Daemon, parse_quantity, Anvil};

/// A transfer of 1 wei from `submitter` with request id `<tag>-<i>`.
pub(crate) fn transfer(submitter: &str, tag: &str, i: usize) -> CreateBody {
    CreateBody {
        submitter: submitter.to_owned(),
        to: Some("0x70997970c51812dc3a010c7d01b50e0d17dc79c8".into()),
        value: Some(1u128.into()),
        gas_limit: Some(21_000),
        request_id: Some(format!("{tag}-{i}")),
        ..CreateBody::default()
    }
}

/// Sends `before` intents alternately to `nodes[0]` and `nodes[1]`, kills
/// whichever node leads `submitter`, sends `after` more to the survivor,
/// and checks every invariant above (nonces from 0).
pub(crate) async fn send_across_a_leader_kill(
    anvil: &Anvil,
    nodes: &mut [Daemon],
    submitter: &str,
    tag: &str,
    before: usize,
    after: usize,
) {
    let http = reqwest::Client::new();
    let clients: Vec<Client> = nodes
        .iter()
        .map(|node| Client::builder(node.base()).build().expect("client"))
        .collect();
    let mut ids = Vec::new();
    for i in 0..before {
        let created = clients[i % 2]
            .create(transfer(submitter, tag, i))
            .await
            .expect("create");
        ids.push(created.body.tx_id);
    }
    let cluster: Value = nodes[0].get_json(&http, "/v1/ops/cluster").await;
    let leader = cluster["leases"][0]["owner"].as_str().unwrap_or_default();
    let gone = usize::from(leader == nodes[1].node_id);
    let survivor = 1 - gone;
    nodes[gone].kill().await;
    for i in before..before + after {
        let created = clients[survivor]
            .create(transfer(submitter, tag, i))
            .await
            .expect("create");
        ids.push(created.body.tx_id);
    }
    let mut nonces = Vec::new();
    for id in &ids {
        let tx = clients[survivor]
            .wait_final(*id, Duration::from_secs(120))
            .await
            .expect("final");
        assert_eq!(tx.state, TxState::Confirmed, "{tx:?}");
        nonces.push(tx.nonce.expect("nonce"));
    }
    nonces.sort_unstable();
    let count = (before + after) as u64;
    assert_eq!(
        nonces,
        (0..count).collect::<Vec<u64>>(),
        "each intent once, no gap"
    );
    let sent = anvil
        .rpc(
            "eth_getTransactionCount",
            serde_json::json!([submitter, "latest"]),
        )
        .await;
    assert_eq!(parse_quantity(&sent), count, "nothing sent twice");
}
