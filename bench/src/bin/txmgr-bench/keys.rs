//! Deterministic bench keys: `key_i = keccak256("txmgr-bench" || i)` with
//! `i` as 8 big-endian bytes.
//!
//! Every phase draws from its own index range, so no two phases share a
//! sender and their nonces never collide on the one anvil:
//!
//! ```text
//! raw, 1 key          0
//! raw, K keys         100_000 + slot × 1_000 + 0..K    (slot = position of K in --submitters)
//! txmgr, 1 submitter  200_000
//! txmgr, K submitters 300_000 + slot × 1_000 + 0..K
//! HTTPS variants      400_000 / 500_000 + …            (--rpc-tls)
//! spend-limited       800_000 / 900_000 + …            (--spend-limit)
//! chains: raw, txmgr  600_000 / 700_000 + 0..--chains-submitters
//! idle daemon         1_000_000 + 0..--idle-submitters
//! txmgr run process   100_000_000 + variant × 200_000 (+ 100_000 for many) (--daemon)
//! ```

use alloy::{
    primitives::{keccak256, Address},
    signers::local::PrivateKeySigner,
};
use anyhow::Context;

use crate::{chains::ChainKeys, daemon_pass::DaemonVariant};

/// Key index of the raw-send phase with one key.
const RAW_ONE_BASE: u64 = 0;
/// First key index of the raw-send phases with many keys.
const RAW_MANY_BASE: u64 = 100_000;
/// Key index of the one-submitter txmgr phase.
const TXMGR_ONE_BASE: u64 = 200_000;
/// First key index of the many-submitter txmgr phases (closed and open loop).
const TXMGR_MANY_BASE: u64 = 300_000;
/// Key index of the one-submitter txmgr phase with RPC over HTTPS.
const TXMGR_TLS_ONE_BASE: u64 = 400_000;
/// First key index of the many-submitter txmgr phases with RPC over HTTPS.
const TXMGR_TLS_MANY_BASE: u64 = 500_000;
/// First key index of the raw sends of phase "chains" (fresh anvils per K,
/// so every K reuses them).
const CHAINS_RAW_BASE: u64 = 600_000;
/// First key index of the submitters of phase "chains".
const CHAINS_TXMGR_BASE: u64 = 700_000;
/// Key index of the one-submitter txmgr phase under a spend limit.
const TXMGR_SPEND_ONE_BASE: u64 = 800_000;
/// First key index of the many-submitter txmgr phases under a spend limit.
const TXMGR_SPEND_MANY_BASE: u64 = 900_000;
/// Key index of the one-submitter phase against a `txmgr run` process; its
/// many-submitter phases start 100,000 later.
const TXMGR_DAEMON_ONE_BASE: u64 = 100_000_000;
/// Distance between the key ranges of two `--daemon-variants`.
const TXMGR_DAEMON_VARIANT_SPAN: u64 = 200_000;
/// First key index of the idle daemon's submitters.
pub(crate) const IDLE_BASE: u64 = 1_000_000;
/// Phase "history": five key sets per history size (plain, cold cache,
/// with retention, the soak, the empty database again), `HISTORY_SPAN`
/// apart, each a "one" key and "many" slots.
const HISTORY_BASE: u64 = 2_000_000;
const HISTORY_SPAN: u64 = 200_000;

/// Keys of one many-submitter phase; consecutive phases are this far apart.
pub(crate) const MAX_KEYS_PER_SLOT: usize = 1_000;

/// Many-submitter phases per run: slots must stay inside their 100,000 range.
pub(crate) const MAX_SLOTS: usize = 100;

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
    (0..count as u64).map(|i| bench_key(base + i)).collect()
}

/// The keys of slot `slot` of a many-key range.
fn slot_keys(base: u64, slot: usize, count: usize) -> anyhow::Result<Vec<PrivateKeySigner>> {
    anyhow::ensure!(
        count <= MAX_KEYS_PER_SLOT && slot < MAX_SLOTS,
        "at most {MAX_KEYS_PER_SLOT} keys per phase and {MAX_SLOTS} phases"
    );
    bench_keys(base + (slot * MAX_KEYS_PER_SLOT) as u64, count)
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
    /// One key set per `--submitters` count.
    pub(crate) raw_many: Vec<Vec<PrivateKeySigner>>,
    pub(crate) txmgr: TxmgrKeys,
    /// The same phases with the RPC over HTTPS (empty without `--rpc-tls`).
    pub(crate) txmgr_tls: TxmgrKeys,
    /// The same phases under a spend limit (empty without `--spend-limit`).
    pub(crate) txmgr_spend: TxmgrKeys,
    /// The same phases against a `txmgr run` process, one key set per
    /// `--daemon-variants` entry (none without `--daemon`).
    pub(crate) txmgr_daemon: Vec<(DaemonVariant, TxmgrKeys)>,
    /// Phase "chains" (empty when it does not run).
    pub(crate) chains: ChainKeys,
    /// Phase "history": per size, the plain run's keys, the cold-cache
    /// run's, the retention run's and the soak's (whose submitters must
    /// start without intents of an earlier phase: those left the pool
    /// unmined, and the soak's transactions would wait behind their nonces),
    /// and the empty database's again (`--history-rebaseline`).
    pub(crate) history: Vec<[TxmgrKeys; 5]>,
}

/// The submitters of one node: one for the "one" phase, one set per
/// `--submitters` count for the "many" phases.
pub(crate) struct TxmgrKeys {
    pub(crate) one: Vec<PrivateKeySigner>,
    pub(crate) many: Vec<Vec<PrivateKeySigner>>,
}

impl TxmgrKeys {
    fn new(one_base: u64, many_base: u64, counts: &[usize]) -> anyhow::Result<TxmgrKeys> {
        Ok(TxmgrKeys {
            one: bench_keys(one_base, 1)?,
            many: counts
                .iter()
                .enumerate()
                .map(|(slot, count)| slot_keys(many_base, slot, *count))
                .collect::<anyhow::Result<_>>()?,
        })
    }

    fn none() -> TxmgrKeys {
        TxmgrKeys {
            one: Vec::new(),
            many: Vec::new(),
        }
    }

    /// Each submitter with the variable holding its key.
    pub(crate) fn submitters(&self) -> Vec<(Address, String, &PrivateKeySigner)> {
        self.one
            .iter()
            .chain(self.many.iter().flatten())
            .map(|key| (key.address(), key_var(key.address()), key))
            .collect()
    }
}

/// The environment variable an `env` signer reads `address`'s key from.
pub(crate) fn key_var(address: Address) -> String {
    format!("TXMGR_BENCH_KEY_{address:x}")
}

impl KeyPlan {
    /// Keys for the phases with 1 and with each of `counts` keys, and
    /// `chain_submitters` keys of each kind for phase "chains".
    pub(crate) fn new(
        counts: &[usize],
        rpc_tls: bool,
        spend_limit: bool,
        daemon: &[DaemonVariant],
        chain_submitters: usize,
        history_sizes: usize,
    ) -> anyhow::Result<KeyPlan> {
        anyhow::ensure!(
            chain_submitters <= MAX_KEYS_PER_SLOT * MAX_SLOTS,
            "--chains-submitters: at most {}",
            MAX_KEYS_PER_SLOT * MAX_SLOTS
        );
        Ok(KeyPlan {
            raw_one: bench_keys(RAW_ONE_BASE, 1)?,
            raw_many: counts
                .iter()
                .enumerate()
                .map(|(slot, count)| slot_keys(RAW_MANY_BASE, slot, *count))
                .collect::<anyhow::Result<_>>()?,
            txmgr: TxmgrKeys::new(TXMGR_ONE_BASE, TXMGR_MANY_BASE, counts)?,
            txmgr_tls: if rpc_tls {
                TxmgrKeys::new(TXMGR_TLS_ONE_BASE, TXMGR_TLS_MANY_BASE, counts)?
            } else {
                TxmgrKeys::none()
            },
            txmgr_spend: if spend_limit {
                TxmgrKeys::new(TXMGR_SPEND_ONE_BASE, TXMGR_SPEND_MANY_BASE, counts)?
            } else {
                TxmgrKeys::none()
            },
            txmgr_daemon: daemon
                .iter()
                .map(|variant| {
                    let one =
                        TXMGR_DAEMON_ONE_BASE + variant.key_slot() * TXMGR_DAEMON_VARIANT_SPAN;
                    Ok((*variant, TxmgrKeys::new(one, one + 100_000, counts)?))
                })
                .collect::<anyhow::Result<_>>()?,
            chains: ChainKeys {
                raw: bench_keys(CHAINS_RAW_BASE, chain_submitters)?,
                txmgr: bench_keys(CHAINS_TXMGR_BASE, chain_submitters)?,
            },
            history: (0..history_sizes as u64)
                .map(|i| {
                    let set = |k: u64| {
                        let one = HISTORY_BASE + k * HISTORY_SPAN;
                        TxmgrKeys::new(one, one + HISTORY_SPAN / 2, counts)
                    };
                    Ok([
                        set(5 * i)?,
                        set(5 * i + 1)?,
                        set(5 * i + 2)?,
                        set(5 * i + 3)?,
                        set(5 * i + 4)?,
                    ])
                })
                .collect::<anyhow::Result<_>>()?,
        })
    }

    /// Every txmgr submitter of the run with the variable holding its key.
    pub(crate) fn submitters(&self) -> Vec<(Address, String, &PrivateKeySigner)> {
        let mut all = self.txmgr.submitters();
        all.extend(self.txmgr_tls.submitters());
        all.extend(self.txmgr_spend.submitters());
        for sets in &self.history {
            for set in sets {
                all.extend(set.submitters());
            }
        }
        all.extend(
            self.chains
                .txmgr
                .iter()
                .map(|key| (key.address(), key_var(key.address()), key)),
        );
        all
    }
}
