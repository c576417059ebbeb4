//! The fenced transaction: the only way to write critical state.

use sqlx::{PgConnection, PgPool, Postgres, Transaction};

use super::{lease::LeaseGuard, StoreError, StoreResult};
use crate::{domain::SubmitterKey, metrics::FENCED_WRITES};

/// A database transaction that has proved, on the database, that its writer
/// holds the submitter's lease with its fencing token.
///
/// [`FencedTx::begin`] locks the lease row `FOR SHARE` and checks the owner
/// (node id and process instance), token and `expires_at > now()`. The share lock is held until commit or
/// rollback, so a take-over (which updates that row) waits for the in-flight
/// fenced commit and the new owner always sees it; and a stale holder that
/// begins after losing the lease writes nothing.
pub struct FencedTx {
    tx: Transaction<'static, Postgres>,
    submitter: SubmitterKey,
    token: i64,
    operation: &'static str,
}

impl FencedTx {
    /// Opens a transaction and checks the fence. `operation` names the write
    /// for metrics and logs (e.g. `allocate`, `record_broadcast`).
    pub async fn begin(
        pool: &PgPool,
        lease: &LeaseGuard,
        operation: &'static str,
    ) -> StoreResult<FencedTx> {
        let result = Self::begin_inner(pool, lease, operation).await;
        if let Err(err) = &result {
            let result = if err.is_fenced() { "fenced" } else { "error" };
            record(lease.submitter.chain_id, operation, result);
        }
        result
    }

    async fn begin_inner(
        pool: &PgPool,
        lease: &LeaseGuard,
        operation: &'static str,
    ) -> StoreResult<FencedTx> {
        let mut tx = pool.begin().await?;
        let held = sqlx::query_scalar!(
            r#"SELECT 1 AS "held!" FROM submitter_lease
              WHERE chain_id = $1 AND submitter = $2 AND owner_node = $3
                AND owner_instance = $4 AND fencing_token = $5 AND expires_at > now()
                FOR SHARE"#,
            lease.submitter.chain_id as _,
            lease.submitter.address_hex(),
            &*lease.owner.node_id,
            &*lease.owner.instance,
            lease.token,
        )
        .fetch_optional(&mut *tx)
        .await?;
        if held.is_none() {
            tx.rollback().await?;
            tracing::warn!(
                target: "txmgr::lease",
                submitter = %lease.submitter,
                fencing_token = lease.token,
                owner = %lease.owner,
                operation,
                "fenced write refused: lease lost"
            );
            return Err(StoreError::Fenced {
                submitter: lease.submitter,
                token: lease.token,
            });
        }
        Ok(FencedTx {
            tx,
            submitter: lease.submitter,
            token: lease.token,
            operation,
        })
    }

    /// The connection to run the transaction's statements on.
    pub fn conn(&mut self) -> &mut PgConnection {
        &mut self.tx
    }

    /// The submitter this transaction is fenced for.
    pub fn submitter(&self) -> SubmitterKey {
        self.submitter
    }

    /// The fencing token proven at `begin`; stored on the rows it writes.
    pub fn token(&self) -> i64 {
        self.token
    }

    /// Lets this transaction commit without waiting for the WAL flush
    /// (`synchronous_commit = off`). Only for writes that recovery can
    /// reconstruct from durable state — never for allocation or attempts. A
    /// completion row written later in the same transaction (a terminal
    /// state) turns durability back on (`completions::record`).
    pub async fn relax_durability(&mut self) -> StoreResult<()> {
        // set_config(.., true) is SET LOCAL in a form the checked macros
        // can describe.
        sqlx::query!("SELECT FROM set_config('synchronous_commit', 'off', true)")
            .execute(&mut *self.tx)
            .await?;
        Ok(())
    }

    /// Undoes [`FencedTx::relax_durability`]: a write that recovery cannot
    /// reconstruct was added to this transaction, so its commit waits for
    /// the WAL flush again.
    pub async fn require_durability(&mut self) -> StoreResult<()> {
        sqlx::query!("SELECT FROM set_config('synchronous_commit', 'on', true)")
            .execute(&mut *self.tx)
            .await?;
        Ok(())
    }

    /// Commits the writes.
    pub async fn commit(self) -> StoreResult<()> {
        let operation = self.operation;
        let chain = self.submitter().chain_id;
        match self.tx.commit().await {
            Ok(()) => {
                record(chain, operation, "ok");
                Ok(())
            }
            Err(err) => {
                record(chain, operation, "error");
                Err(err.into())
            }
        }
    }

    /// Abandons the writes (also what dropping it does).
    pub async fn rollback(self) -> StoreResult<()> {
        Ok(self.tx.rollback().await?)
    }
}

fn record(chain: crate::domain::ChainId, operation: &'static str, result: &'static str) {
    let chain = crate::metrics::chain_label(chain);
    metrics::counter!(FENCED_WRITES, "chain" => chain, "operation" => operation, "result" => result)
        .increment(1);
}
