//! The bench's private anvil (the test kit's launcher) started with manual
//! mining, plus the few cheat calls the bench needs.
//!
//! Manual mining (`--no-mining`) keeps every sent transaction pending, so a
//! phase measures acceptance by the node (`eth_sendRawTransaction`
//! answered) and nothing else: no block production competes for the two
//! cores.

use std::time::Duration;

use alloy::{primitives::Address, providers::Provider};
use anyhow::Context;
use serde_json::json;
pub(crate) use txmgr_testkit::{Anvil, CHAIN_ID};
use txmgr_testkit::{AnvilOptions, Mining};

/// Balance given to every bench key: far more than N transfers cost.
const FUNDING_WEI: &str = "0x3635c9adc5dea00000000";

/// Bound on one cheat call: looser than the tests' default, since the pool
/// may hold a whole phase of pending transactions when it is emptied.
const RPC_TIMEOUT: Duration = Duration::from_secs(30);

/// Starts the bench anvil from `ANVIL_BIN` or `.tools/bin/anvil`.
pub(crate) async fn start() -> anyhow::Result<Anvil> {
    start_on(CHAIN_ID).await
}

/// Starts a bench anvil serving `chain_id` (phases with several chains).
pub(crate) async fn start_on(chain_id: u64) -> anyhow::Result<Anvil> {
    let options = AnvilOptions {
        mining: Mining::Manual,
        rpc_timeout: RPC_TIMEOUT,
        chain_id,
        ..AnvilOptions::default()
    };
    Ok(Anvil::try_start(&options).await?)
}

/// `count` bench anvils serving chain ids [`CHAIN_ID`], `CHAIN_ID + 1`, ….
pub(crate) async fn start_chains(count: usize) -> anyhow::Result<Vec<Anvil>> {
    let mut anvils = Vec::with_capacity(count);
    for i in 0..count as u64 {
        anvils.push(start_on(CHAIN_ID + i).await?);
    }
    Ok(anvils)
}

/// Gives every address a large balance (`anvil_setBalance`).
pub(crate) async fn fund(anvil: &Anvil, addresses: &[Address]) -> anyhow::Result<()> {
    for address in addresses {
        anvil
            .try_rpc("anvil_setBalance", json!([address, FUNDING_WEI]))
            .await?;
    }
    Ok(())
}

/// Empties the pool, so one phase's pending transactions do not slow the
/// next phase's sends.
pub(crate) async fn drop_all_transactions(anvil: &Anvil) -> anyhow::Result<()> {
    anvil
        .try_rpc("anvil_dropAllTransactions", json!([]))
        .await?;
    Ok(())
}

/// `(max_fee_per_gas, max_priority_fee_per_gas)` priced like the engine
/// prices an intent without fees: `2 × base_fee + priority`.
pub(crate) async fn eip1559_fees(anvil: &Anvil) -> anyhow::Result<(u128, u128)> {
    let provider = anvil.provider();
    let block = provider
        .get_block_by_number(alloy::eips::BlockNumberOrTag::Latest)
        .await
        .context("eth_getBlockByNumber")?
        .context("no latest block")?;
    let base = u128::from(block.header.base_fee_per_gas.unwrap_or(0));
    let priority = provider
        .get_max_priority_fee_per_gas()
        .await
        .context("eth_maxPriorityFeePerGas")?;
    Ok((base * 2 + priority, priority))
}
