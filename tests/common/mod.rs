//! Shared integration-test harness: every test owns a fresh PostgreSQL
//! database ([`TestDb`]) and its own anvil on a free loopback port
//! ([`Anvil`], from the `txmgr-testkit` crate) — or, for the core scenarios, Hardhat's node as well
//! ([`DevChain`]) —, and waits with deadline-bound polling ([`eventually`],
//! [`wait_until`]) instead of sleeping, so tests run in parallel and never
//! depend on timing luck.
//!
//! Each test file pulls this in with `mod common;`; not every file uses every
//! helper, hence the blanket `dead_code` allowance.
#![allow(dead_code, unused_imports)]

pub(crate) mod clock;
pub(crate) mod cluster;
pub(crate) mod daemon;
pub(crate) mod db;
pub(crate) mod dev_chain;
pub(crate) mod faulty_chain;
pub(crate) mod hardhat;
pub(crate) mod intents;
pub(crate) mod invariants;
pub(crate) mod node;
pub(crate) mod pg_cluster;
pub(crate) mod rpc_proxy;
pub(crate) mod tls;
pub(crate) mod txs;

pub(crate) use db::TestDb;
pub(crate) use intents::{transfer, transfer_from, DEV};
// The kit's anvil, ports and polling, under the names the tests always used.
pub(crate) use dev_chain::{Client, DevChain, DevNode, Mining};
pub(crate) use txmgr_testkit::{
    eventually, free_port, parse_quantity, wait_until, Anvil, CHAIN_ID, DEV_ADDRESS_0,
    DEV_PRIVATE_KEY_0,
};
