//! Retention while a phase runs (`--history-retention`, `--soak`): rounds as
//! a node runs them, paced by [`Pace::pause_after`] with the daemon's
//! defaults, on a pool of their own, until stopped.

use std::time::{Duration, Instant};

use anyhow::Context;
use tokio::{sync::watch, task::JoinHandle};
use txmgr::config::{DEFAULT_HISTORY_DELETE_RATE, DEFAULT_HISTORY_INTERVAL};
use txmgr_actors::store::history_retention::{self, Pace, RetentionRules, Round};

use crate::node::BenchDb;

/// The daemon's default pacing (a cap of a second on the pause instead let
/// retention run at full pace beside the phase).
const PACE: Pace = Pace {
    every: DEFAULT_HISTORY_INTERVAL,
    delete_rate: DEFAULT_HISTORY_DELETE_RATE,
};

/// A running retention loop.
pub(crate) struct RetentionLoop {
    stop: watch::Sender<bool>,
    task: JoinHandle<Removal>,
    pool: sqlx::PgPool,
}

/// What a retention loop did.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Removal {
    /// Intents removed.
    pub(crate) intents: u64,
    /// Rounds run.
    pub(crate) rounds: u64,
}

impl RetentionLoop {
    /// Starts rounds with the `retain` that `retain_after` gives for the
    /// seconds since the start (at least a second).
    pub(crate) async fn start(
        db: &BenchDb,
        retain_after: impl Fn(f64) -> Duration + Send + 'static,
    ) -> anyhow::Result<Self> {
        let pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(2)
            .connect(&db.url)
            .await
            .context("retention pool")?;
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn(rounds(pool.clone(), stopped, retain_after));
        Ok(Self { stop, task, pool })
    }

    /// A receiver that sees the loop's stop (for tasks that end with it).
    pub(crate) fn stopped(&self) -> watch::Receiver<bool> {
        self.stop.subscribe()
    }

    /// Stops the loop after its current round; what it removed.
    pub(crate) async fn stop(self) -> anyhow::Result<Removal> {
        let _ = self.stop.send(true);
        let removal = self.task.await.context("retention task")?;
        self.pool.close().await;
        Ok(removal)
    }
}

async fn rounds(
    pool: sqlx::PgPool,
    mut stopped: watch::Receiver<bool>,
    retain_after: impl Fn(f64) -> Duration,
) -> Removal {
    let started = Instant::now();
    let mut removal = Removal::default();
    while !*stopped.borrow() {
        let rules = RetentionRules {
            retain: retain_after(started.elapsed().as_secs_f64()).max(Duration::from_secs(1)),
            audit_retain: Duration::ZERO,
            max_batches: history_retention::ROUND_BATCHES,
        };
        let round_started = Instant::now();
        let (behind, removed) = match history_retention::round(&pool, "bench", rules).await {
            Ok(Round::Ran {
                removed,
                pass_completed,
                ..
            }) => {
                removal.intents += removed.intents;
                removal.rounds += 1;
                (!pass_completed, removed.intents)
            }
            Ok(Round::Skipped) => (false, 0),
            Err(e) => {
                eprintln!("txmgr-bench: retention round: {e}");
                (false, 0)
            }
        };
        let pause = PACE.pause_after(round_started.elapsed(), removed, behind);
        tokio::select! {
            _ = stopped.changed() => {}
            () = tokio::time::sleep(pause) => {}
        }
    }
    removal
}
