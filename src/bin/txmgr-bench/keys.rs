//! Deterministic bench keys: `key_i = keccak256("txmgr-bench" || i)` with
//! `i` as 8 big-endian bytes.
//!
//! Every phase draws from its own index range, so no two phases share a
//! sender and their nonces never collide on the one anvil.

use alloy::{
    primitives::{keccak256, Address},
    signers::local::PrivateKeySigner,
};
use anyhow::Context;

/// First key index of the raw-send phase with one key.
pub(crate) const RAW_ONE_BASE: u64 = 0;
/// First key index of the raw-send phase with many keys.
pub(crate) const RAW_MANY_BASE: u64 = 1_000;
/// Key index of the one-submitter txmgr phase.
pub(crate) const TXMGR_ONE_BASE: u64 = 2_000;
/// First key index of the many-submitter txmgr phases (closed and open loop).
pub(crate) const TXMGR_MANY_BASE: u64 = 3_000;

/// Key index of the one-submitter txmgr phase with RPC over HTTPS.
pub(crate) const TXMGR_TLS_ONE_BASE: u64 = 4_000;
/// First key index of the many-submitter txmgr phase with RPC over HTTPS.
pub(crate) const TXMGR_TLS_MANY_BASE: u64 = 5_000;

/// The largest key count a range may hold without reaching the next one.
pub(crate) const MAX_KEYS_PER_RANGE: usize = 1_000;

/// The private key with index `i`.
pub(crate) fn bench_key(i: u64) -> anyhow::Result<PrivateKeySigner> {
    let mut seed = b"txmgr-bench".to_vec();
    seed.extend_from_slice(&i.to_be_bytes());
    // A hash at or above the curve order is astronomically unlikely; say so
    // rather than panic if it happens.
    PrivateKeySigner::from_bytes(&keccak256(seed))
        .with_context(|| format!("bench key {i} is not a valid secp256k1 scalar"))
}

/// `count` keys starting at index `base`.
pub(crate) fn bench_keys(base: u64, count: usize) -> anyhow::Result<Vec<PrivateKeySigner>> {
    anyhow::ensure!(
        count <= MAX_KEYS_PER_RANGE,
        "at most {MAX_KEYS_PER_RANGE} keys per phase"
    );
    (0..count as u64).map(|i| bench_key(base + i)).collect()
}

/// Addresses of `keys`.
pub(crate) fn addresses(keys: &[PrivateKeySigner]) -> Vec<Address> {
    keys.iter().map(PrivateKeySigner::address).collect()
}

/// `0x` + 64 hex digits of a key, as an `env` signer reads it.
pub(crate) fn private_key_hex(key: &PrivateKeySigner) -> String {
    format!("0x{}", alloy::hex::encode(key.to_bytes()))
}

/// The keys of a run, drawn before the runtime starts because the engine's
/// `env` signers read them from the environment.
pub(crate) struct KeyPlan {
    pub(crate) raw_one: Vec<PrivateKeySigner>,
    pub(crate) raw_many: Vec<PrivateKeySigner>,
    pub(crate) txmgr: TxmgrKeys,
    /// The same phases with the RPC over HTTPS (empty without `--rpc-tls`).
    pub(crate) txmgr_tls: TxmgrKeys,
}

/// The submitters of one node: one for the "one" phase, the rest for "many".
pub(crate) struct TxmgrKeys {
    pub(crate) one: Vec<PrivateKeySigner>,
    pub(crate) many: Vec<PrivateKeySigner>,
}

impl TxmgrKeys {
    fn new(one_base: u64, many_base: u64, submitters: usize) -> anyhow::Result<TxmgrKeys> {
        Ok(TxmgrKeys {
            one: bench_keys(one_base, 1)?,
            many: bench_keys(many_base, submitters)?,
        })
    }

    /// Each submitter with the variable holding its key.
    pub(crate) fn submitters(&self) -> Vec<(Address, String, &PrivateKeySigner)> {
        self.one
            .iter()
            .chain(&self.many)
            .map(|key| (key.address(), key_var(key.address()), key))
            .collect()
    }
}

/// The environment variable an `env` signer reads `address`'s key from.
fn key_var(address: Address) -> String {
    format!("TXMGR_BENCH_KEY_{address:x}")
}

impl KeyPlan {
    pub(crate) fn new(submitters: usize, rpc_tls: bool) -> anyhow::Result<KeyPlan> {
        let tls_submitters = if rpc_tls { submitters } else { 0 };
        let mut txmgr_tls =
            TxmgrKeys::new(TXMGR_TLS_ONE_BASE, TXMGR_TLS_MANY_BASE, tls_submitters)?;
        if !rpc_tls {
            txmgr_tls.one.clear();
        }
        Ok(KeyPlan {
            raw_one: bench_keys(RAW_ONE_BASE, 1)?,
            raw_many: bench_keys(RAW_MANY_BASE, submitters)?,
            txmgr: TxmgrKeys::new(TXMGR_ONE_BASE, TXMGR_MANY_BASE, submitters)?,
            txmgr_tls,
        })
    }

    /// Every txmgr submitter of the run with the variable holding its key.
    pub(crate) fn submitters(&self) -> Vec<(Address, String, &PrivateKeySigner)> {
        let mut all = self.txmgr.submitters();
        all.extend(self.txmgr_tls.submitters());
        all
    }
}
