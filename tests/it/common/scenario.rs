//! The set-up most pipeline tests start from, written once: a fresh
//! database, an anvil on a free port, and one in-process node leading the
//! funded dev account.

use txmgr_testkit::Anvil;

use super::{
    node::{config_toml, TestNode},
    TestDb,
};

/// A database, an anvil and one node on them. Keep the whole value (or
/// bind every field to a name) for the test's duration: dropping `anvil`
/// stops the chain.
pub(crate) struct Scenario {
    /// The test's own database.
    pub(crate) db: TestDb,
    /// The test's own chain.
    pub(crate) anvil: Anvil,
    /// Node `n1`, leading `DEV_ADDRESS_0`.
    pub(crate) node: TestNode,
}

impl Scenario {
    /// One node `n1` with the base test configuration
    /// ([`config_toml`]); `submitter_extra` is appended to the dev
    /// submitter's table (e.g. `finality = { confirmations = 8 }`).
    pub(crate) async fn single_node(submitter_extra: &str) -> Scenario {
        Self::single_node_on(&[], submitter_extra).await
    }

    /// [`Scenario::single_node`] on an anvil started with extra arguments
    /// (`--no-mining`, `--block-time 0.2`, …).
    pub(crate) async fn single_node_on(anvil_args: &[&str], submitter_extra: &str) -> Scenario {
        let db = TestDb::migrated().await;
        let anvil = Anvil::start_with(anvil_args).await;
        let node = TestNode::start(&config_toml(
            &db.url,
            &anvil.rpc_url(),
            "n1",
            submitter_extra,
        ))
        .await;
        Scenario { db, anvil, node }
    }
}
