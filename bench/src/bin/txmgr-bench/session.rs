//! One in-process node serving the closed-loop txmgr phases ("one", then
//! "many" once per `--submitters` count) and the open-loop ack phase.

use alloy::primitives::Address;
use anyhow::Context;

use crate::{
    anvil::{self, Anvil},
    keys::{self, TxmgrKeys},
    node::{self, BenchDb, Node, NodeSettings},
    phases::{Target, TxmgrBench},
    report, Args, Phase,
};

/// Where the node under test sends its JSON-RPC.
pub(crate) struct RpcTarget {
    pub(crate) url: String,
    pub(crate) ca_file: Option<std::path::PathBuf>,
}

/// What one node measured.
pub(crate) struct TxmgrPhases {
    pub(crate) one: Option<report::TxmgrPhase>,
    /// One per `--submitters` count, in order.
    pub(crate) many: Vec<report::TxmgrPhase>,
    pub(crate) ack: Option<report::AckPhase>,
}

/// Starts one node with `keys_of_node` as submitters, its RPC at `rpc`, and
/// runs the txmgr phases (the open-loop one only with `with_ack`, over the
/// first `--submitters` count); with `spend_limit`, every submitter has a
/// spend limit that never binds.
pub(crate) async fn run_txmgr(
    args: &Args,
    keys_of_node: &TxmgrKeys,
    rpc: &RpcTarget,
    anvil: &Anvil,
    db: &BenchDb,
    with_ack: bool,
    spend_limit: bool,
) -> anyhow::Result<TxmgrPhases> {
    let submitters = keys_of_node.submitters();
    let addresses: Vec<Address> = submitters.iter().map(|(a, _, _)| *a).collect();
    anvil::fund(anvil, &addresses).await?;
    let ack_total = args
        .ack_rate
        .map_or(0, |r| (r * args.ack_duration.as_secs_f64()).ceil() as u64);
    let settings = settings(args, ack_total, spend_limit);
    let env_submitters: Vec<(Address, String)> = submitters
        .iter()
        .map(|(a, var, _)| (*a, var.clone()))
        .collect();
    let chains = [(anvil.chain_id(), rpc.url.clone())];
    let mut toml = node::config_toml(&db.url, &chains, &settings, &env_submitters);
    if let Some(ca_file) = &rpc.ca_file {
        toml = toml.replace(
            "[chain]\n",
            &format!("[chain]\nca_file = \"{}\"\n", ca_file.display()),
        );
    }
    let node = Node::start(&toml).await.context("starting the node")?;
    let bench = TxmgrBench::new(args, Target::InProcess(&node), db, &[anvil], Vec::new())?;
    let outcome = closed_and_open_loops(args, &bench, keys_of_node, with_ack).await;
    node.stop().await;
    outcome
}

/// The engine settings of every txmgr phase: nothing is mined, so every
/// intent of the run (plus warm-ups and `extra`) holds an in-flight slot.
pub(crate) fn settings(args: &Args, extra: u64, spend_limit: bool) -> NodeSettings {
    NodeSettings {
        max_in_flight: args.count as u64 + extra + 16,
        batch_size: args.batch_size,
        ingress_capacity: (args.concurrency * 2).max(10_000),
        db_connections: args.db_connections,
        poll_interval: args.poll_interval.clone(),
        batch_sends: !args.no_batch_sends,
        spend_limit,
    }
}

/// Phases "one" and "many" (and, with `with_ack`, the open-loop one over
/// the first `--submitters` count) against `bench`'s node.
pub(crate) async fn closed_and_open_loops(
    args: &Args,
    bench: &TxmgrBench<'_>,
    keys_of_node: &TxmgrKeys,
    with_ack: bool,
) -> anyhow::Result<TxmgrPhases> {
    let one_address = keys::addresses(&keys_of_node.one);
    let many_addresses: Vec<Vec<Address>> = keys_of_node
        .many
        .iter()
        .map(|set| keys::addresses(set))
        .collect();
    let mut phases = TxmgrPhases {
        one: None,
        many: Vec::new(),
        ack: None,
    };
    if args.phases.contains(&Phase::One) {
        phases.one = Some(bench.closed_loop(&one_address, args.count, "one").await?);
    }
    if args.phases.contains(&Phase::Many) {
        for set in &many_addresses {
            let tag = format!("many{}", set.len());
            phases
                .many
                .push(bench.closed_loop(set, args.count, &tag).await?);
        }
    }
    if let (Some(rate), true, Some(set)) = (args.ack_rate, with_ack, many_addresses.first()) {
        phases.ack = Some(bench.open_loop(set, rate, args.ack_duration).await?);
    }
    Ok(phases)
}

/// `--one-pkcs11`: the closed-loop "one" phase on a fresh node whose single
/// submitter's key is on a SoftHSM2 token made for the run (the `pkcs11`
/// signer), with the settings of [`run_txmgr`].
pub(crate) async fn run_one_on_pkcs11(
    args: &Args,
    anvil: &Anvil,
    db: &BenchDb,
) -> anyhow::Result<report::TxmgrPhase> {
    let (hsm, hsm_address) = crate::signers::bench_token()?;
    anvil::fund(anvil, &[hsm_address]).await?;
    let settings = settings(args, 0, false);
    let chains = [(anvil.chain_id(), anvil.rpc_url())];
    let mut toml = node::config_toml(&db.url, &chains, &settings, &[]);
    toml.push_str(&format!(
        "[submitters.\"{:#x}\"]\nsigner = {{ kind = \"pkcs11\", module = \"{}\", token_label = \"{}\", key_label = \"{}\", pin_file = \"{}\", max_sessions = 8 }}\n",
        hsm_address,
        txmgr_testkit::SOFTHSM_MODULE,
        crate::signers::HSM_TOKEN,
        crate::signers::HSM_KEY,
        hsm.pin_file.display()
    ));
    let node = Node::start(&toml)
        .await
        .context("starting the pkcs11 node")?;
    let bench = TxmgrBench::new(args, Target::InProcess(&node), db, &[anvil], Vec::new())?;
    let phase = bench
        .closed_loop(&[hsm_address], args.count, "one-pkcs11")
        .await;
    node.stop().await;
    phase
}
