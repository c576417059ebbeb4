//! Invariant checks after a scenario (README "Running several nodes"), read from the
//! database and the chain independently of the daemon.

use std::{collections::HashSet, time::Duration};

use serde_json::json;
use sqlx::PgPool;

use super::{eventually, parse_quantity, DevNode};

/// Waits until `count` intents have a receipt.
pub(crate) async fn wait_mined(pool: &PgPool, count: i64, timeout: Duration) {
    eventually(timeout, Duration::from_millis(100), || {
        let pool = pool.clone();
        async move {
            let mined: i64 =
                sqlx::query_scalar("SELECT count(*) FROM managed_tx WHERE receipt IS NOT NULL")
                    .fetch_one(&pool)
                    .await
                    .ok()?;
            (mined >= count).then_some(())
        }
    })
    .await;
}

/// Per submitter: mined nonces unique and contiguous from `start_nonce`;
/// each intent mined at most once and its receipt hash is one of its own
/// attempts at its own nonce on chain; the chain's nonce equals ours.
pub(crate) async fn check(pool: &PgPool, chain: &impl DevNode, submitter: &str, start_nonce: u64) {
    check_on(pool, super::CHAIN_ID, chain, submitter, start_nonce).await
}

/// [`check`] for the submitter's intents on the chain `chain_id`.
pub(crate) async fn check_on(
    pool: &PgPool,
    chain_id: u64,
    chain: &impl DevNode,
    submitter: &str,
    start_nonce: u64,
) {
    let submitter = submitter.to_lowercase();
    let submitter = submitter.as_str();
    let rows: Vec<(uuid::Uuid, Option<i64>, String, Option<String>)> = sqlx::query_as(
        "SELECT tx_id, nonce, state, mined_tx_hash FROM managed_tx
          WHERE submitter = $1 AND chain_id = $2 ORDER BY nonce",
    )
    .bind(submitter)
    .bind(i64::try_from(chain_id).expect("chain id"))
    .fetch_all(pool)
    .await
    .expect("read intents");
    let mut mined_nonces = Vec::new();
    let mut hashes = HashSet::new();
    for (tx_id, nonce, state, mined) in &rows {
        let Some(hash) = mined else { continue };
        assert!(hashes.insert(hash.clone()), "hash {hash} recorded twice");
        let owned: i64 =
            sqlx::query_scalar("SELECT count(*) FROM tx_attempt WHERE tx_id = $1 AND tx_hash = $2")
                .bind(tx_id)
                .bind(hash)
                .fetch_one(pool)
                .await
                .expect("attempt lookup");
        assert_eq!(
            owned, 1,
            "{tx_id} ({state}) mined {hash}, which is not one of its attempts"
        );
        let on_chain = chain.rpc("eth_getTransactionByHash", json!([hash])).await;
        let chain_nonce = parse_quantity(&on_chain["nonce"]);
        let nonce = nonce.expect("a mined intent keeps its nonce");
        assert_eq!(chain_nonce as i64, nonce, "{tx_id} mined at another nonce");
        mined_nonces.push(nonce as u64);
    }
    mined_nonces.sort_unstable();
    let expected: Vec<u64> = (start_nonce..start_nonce + mined_nonces.len() as u64).collect();
    assert_eq!(
        mined_nonces, expected,
        "mined nonces must be contiguous from {start_nonce}"
    );
    let chain_count = parse_quantity(
        &chain
            .rpc("eth_getTransactionCount", json!([submitter, "latest"]))
            .await,
    );
    assert_eq!(
        chain_count,
        start_nonce + mined_nonces.len() as u64,
        "chain and database disagree"
    );
}
