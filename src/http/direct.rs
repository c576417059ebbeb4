//! [`DirectSubmissions`]: the smallest correct [`Submissions`] — one
//! `insert_queued` per request.

use std::collections::HashSet;

use alloy::primitives::Address;
use async_trait::async_trait;
use sqlx::PgPool;
use txmgr_actors::{
    domain::{CreateError, CreateOutcome, NewIntent},
    store::intents::insert_queued,
};

use super::Submissions;

/// Persists each create straight away, without the engine's group commit,
/// back-pressure or PROTECT check. It is what the HTTP tests run against and
/// what tooling uses to enqueue intents without a running engine; idempotency
/// and concurrent duplicates are still settled by `insert_queued` (the
/// request-id unique index), so replays and conflicts behave as in production.
#[derive(Debug, Clone)]
pub struct DirectSubmissions {
    /// Where intents are written.
    pool: PgPool,
    /// Submitters this deployment serves; anyone else gets `UnknownSubmitter`.
    known: HashSet<Address>,
}

impl DirectSubmissions {
    /// Serves exactly the `known` submitters.
    pub fn new(pool: PgPool, known: impl IntoIterator<Item = Address>) -> Self {
        Self {
            pool,
            known: known.into_iter().collect(),
        }
    }
}

#[async_trait]
impl Submissions for DirectSubmissions {
    async fn create(&self, intent: NewIntent) -> Result<CreateOutcome, CreateError> {
        if !self.known.contains(&intent.submitter.address) {
            return Err(CreateError::UnknownSubmitter(intent.submitter.address));
        }
        let outcomes = insert_queued(&self.pool, std::slice::from_ref(&intent))
            .await
            .map_err(|e| CreateError::Unavailable(e.to_string()))?;
        outcomes.into_iter().next().ok_or_else(|| {
            CreateError::Unavailable("insert_queued answered no outcome for one create".to_owned())
        })
    }
}
