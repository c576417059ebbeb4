//! The completion feed (`GET /v1/completions`): one page, a follower that
//! hands each page's cursor to the caller, and waiting for final states.

use std::{
    collections::{HashMap, HashSet},
    future::Future,
    time::Duration,
};

use tokio::time::Instant;
use txmgr_api::{CompletionRow, FeedEvent, FeedPage, TxView};
use uuid::Uuid;

use crate::{Client, Error, Result};

/// Which rows of the feed to read.
///
/// ```
/// use std::time::Duration;
/// let query = txmgr_client::FeedQuery {
///     after: Some("4123-88".into()), // a stored `next_after`
///     chain_ids: vec![1],
///     wait: Some(Duration::from_secs(20)),
///     ..Default::default()
/// };
/// assert!(!query.funds);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FeedQuery {
    /// Continue after this cursor (a page's `next_after`); `None` = from
    /// the oldest row the daemon keeps (`feed.retain`); `"end"` = after the
    /// feed's current end (see [`Client::feed_end`]).
    pub after: Option<String>,
    /// Only these chains; every chain when empty.
    pub chain_ids: Vec<u64>,
    /// Page size (daemon default 100, at most 1000).
    pub limit: Option<u32>,
    /// Long poll: wait up to this long when nothing is new (at most 60 s).
    pub wait: Option<Duration>,
    /// Also funds events (`LOW_BALANCE`, `BALANCE_RESTORED`).
    pub funds: bool,
}

/// What a follower's callback tells it to do next (see [`Client::follow`]).
///
/// ```
/// let flow = txmgr_client::Flow::Continue;
/// assert_ne!(flow, txmgr_client::Flow::Stop);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// Read the next page.
    Continue,
    /// Return from [`Client::follow`].
    Stop,
}

/// The feed events after which an intent never changes again (STUCK may
/// still confirm; REORGED_OUT is followed by a new final row).
fn is_final(event: FeedEvent) -> bool {
    matches!(
        event,
        FeedEvent::Confirmed | FeedEvent::FailedFinal | FeedEvent::Rejected | FeedEvent::Cancelled
    )
}

/// The longest long poll a single request asks for.
const LONG_POLL: Duration = Duration::from_secs(30);
/// The shortest time given to one read of a wait (so a wait that is
/// almost over still reads once).
const MIN_READ: Duration = Duration::from_secs(1);
/// Time a long poll's answer may take beyond its `wait`.
const LONG_POLL_MARGIN: Duration = Duration::from_secs(15);

impl Client {
    /// One page of the feed.
    ///
    /// ```no_run
    /// # async fn demo(txmgr: txmgr_client::Client) -> txmgr_client::Result<()> {
    /// use std::time::Duration;
    /// let page = txmgr
    ///     .completions(&txmgr_client::FeedQuery { wait: Some(Duration::from_secs(20)), ..Default::default() })
    ///     .await?;
    /// for row in &page.items { println!("{} {:?} {}", row.cursor, row.tx_id, row.state); }
    /// # Ok(()) }
    /// ```
    pub async fn completions(&self, query: &FeedQuery) -> Result<FeedPage> {
        let mut pairs = Vec::new();
        pairs.extend(query.after.clone().map(|after| ("after", after)));
        pairs.extend(
            query
                .chain_ids
                .iter()
                .map(|id| ("chain_id", id.to_string())),
        );
        pairs.extend(query.limit.map(|limit| ("limit", limit.to_string())));
        pairs.extend(
            query
                .wait
                .map(|wait| ("wait", format!("{}ms", wait.as_millis()))),
        );
        if query.funds {
            pairs.push(("funds", "true".to_owned()));
        }
        // A long poll may take its whole `wait`: each attempt gets that
        // plus a margin, whatever the client's own timeout.
        let timeout = query.wait.map(|wait| wait + LONG_POLL_MARGIN);
        self.send_json(
            reqwest::Method::GET,
            &["v1", "completions"],
            &pairs,
            None::<&()>,
            crate::retry::Repeat::Safe,
            timeout,
        )
        .await
        .map(|(_, page)| page)
    }

    /// The feed's current end (`GET /v1/completions?after=end`): take it
    /// before creating the intents you will wait for with
    /// [`Client::wait_final_many`], or to follow only what completes from
    /// now on. `None` while the feed is empty (then start from the beginning).
    ///
    /// ```no_run
    /// # async fn demo(txmgr: txmgr_client::Client, bodies: Vec<txmgr_client::api::CreateBody>) -> txmgr_client::Result<()> {
    /// let cursor = txmgr.feed_end().await?;
    /// let mut ids = Vec::new();
    /// for body in bodies { ids.push(txmgr.create(body).await?.body.tx_id); }
    /// let rows = txmgr.wait_final_many(&ids, cursor, std::time::Duration::from_secs(300)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn feed_end(&self) -> Result<Option<String>> {
        let page = self
            .completions(&FeedQuery {
                after: Some("end".to_owned()),
                limit: Some(1),
                ..FeedQuery::default()
            })
            .await?;
        Ok(page.next_after)
    }

    /// Follows the feed from `query.after`, long-polling, and hands every
    /// page that moves the cursor to `on_page` — store its `next_after`
    /// with your own data in the callback, and start the next follower from
    /// it: nothing is missed and nothing repeated. No answer and 5xx are
    /// waited out for ever (with backoff); a 4xx is returned.
    ///
    /// ```no_run
    /// # async fn demo(txmgr: txmgr_client::Client, stored: Option<String>) -> txmgr_client::Result<()> {
    /// use txmgr_client::{FeedQuery, Flow};
    /// txmgr
    ///     .follow(FeedQuery { after: stored, ..Default::default() }, |page| async move {
    ///         for row in &page.items { println!("{:?} is {}", row.tx_id, row.state); }
    ///         // save page.next_after in the same database transaction as the rows' effects
    ///         Flow::Continue
    ///     })
    ///     .await
    /// # }
    /// ```
    pub async fn follow<F, Fut>(&self, mut query: FeedQuery, mut on_page: F) -> Result<()>
    where
        F: FnMut(FeedPage) -> Fut,
        Fut: Future<Output = Flow>,
    {
        query.wait = Some(query.wait.unwrap_or(LONG_POLL));
        let mut failures = 0u32;
        loop {
            let page = match self.completions(&query).await {
                Ok(page) => page,
                Err(error) if is_passing(&error) => {
                    failures += 1;
                    tokio::time::sleep(self.retry.backoff(failures)).await;
                    continue;
                }
                Err(error) => return Err(error),
            };
            failures = 0;
            if page.items.is_empty() && page.next_after == query.after {
                continue;
            }
            advance(&mut query.after, &page.next_after);
            if on_page(page).await == Flow::Stop {
                return Ok(());
            }
        }
    }

    /// Waits until the transaction is final (CONFIRMED, FAILED_FINAL,
    /// REJECTED or CANCELLED) and returns it, reading it with backoff
    /// (250 ms doubling to 2 s); [`Error::WaitTimeout`] after `timeout`.
    ///
    /// ```no_run
    /// # async fn demo(txmgr: txmgr_client::Client, id: uuid::Uuid) -> txmgr_client::Result<()> {
    /// let tx = txmgr.wait_final(id, std::time::Duration::from_secs(300)).await?;
    /// assert!(tx.state.is_terminal());
    /// # Ok(()) }
    /// ```
    pub async fn wait_final(&self, tx_id: Uuid, timeout: Duration) -> Result<TxView> {
        let start = Instant::now();
        let mut pause = Duration::from_millis(250);
        let out_of_time = |start: Instant| Error::WaitTimeout {
            pending: vec![tx_id],
            waited: start.elapsed(),
        };
        loop {
            // Each read (its retries included) ends with the wait.
            let left = timeout.saturating_sub(start.elapsed());
            let tx = tokio::time::timeout(left.max(MIN_READ), self.get(tx_id))
                .await
                .map_err(|_| out_of_time(start))??;
            if tx.state.is_terminal() {
                return Ok(tx);
            }
            let left = timeout.saturating_sub(start.elapsed());
            if left.is_zero() {
                return Err(out_of_time(start));
            }
            tokio::time::sleep(pause.min(left)).await;
            pause = (pause * 2).min(Duration::from_secs(2));
        }
    }

    /// Waits until every one of `tx_ids` is final, by the completion feed
    /// (long polls, not a read per id), and returns their final rows in the
    /// order of `tx_ids`. Start `after` at a cursor taken before the
    /// intents were created ([`Client::feed_end`], your follower's, or a
    /// page's `next_after`); `None` reads from the oldest row kept. [`Error::WaitTimeout`] names
    /// the ids still pending after `timeout`.
    ///
    /// ```no_run
    /// # async fn demo(txmgr: txmgr_client::Client, a: uuid::Uuid, b: uuid::Uuid, cursor: Option<String>) -> txmgr_client::Result<()> {
    /// let rows = txmgr.wait_final_many(&[a, b], cursor, std::time::Duration::from_secs(300)).await?;
    /// for row in rows { println!("{:?}: {} in block {:?}", row.tx_id, row.state, row.block_number); }
    /// # Ok(()) }
    /// ```
    pub async fn wait_final_many(
        &self,
        tx_ids: &[Uuid],
        after: Option<String>,
        timeout: Duration,
    ) -> Result<Vec<CompletionRow>> {
        let start = Instant::now();
        let wanted: HashSet<Uuid> = tx_ids.iter().copied().collect();
        let mut found: HashMap<Uuid, CompletionRow> = HashMap::new();
        let mut query = FeedQuery {
            after,
            limit: Some(1000),
            ..FeedQuery::default()
        };
        while found.len() < wanted.len() {
            let left = timeout.saturating_sub(start.elapsed());
            if left.is_zero() {
                return Err(Error::WaitTimeout {
                    pending: tx_ids
                        .iter()
                        .filter(|id| !found.contains_key(id))
                        .copied()
                        .collect::<HashSet<_>>()
                        .into_iter()
                        .collect(),
                    waited: start.elapsed(),
                });
            }
            query.wait = Some(left.min(LONG_POLL));
            let Ok(page) =
                tokio::time::timeout(left + LONG_POLL_MARGIN, self.completions(&query)).await
            else {
                continue; // out of time: the next turn reports it
            };
            let page = page?;
            for row in page.items {
                if let Some(id) = row.tx_id.filter(|id| wanted.contains(id)) {
                    if is_final(row.state) {
                        found.insert(id, row);
                    } else if row.state == FeedEvent::ReorgedOut {
                        // Reported final, then its block left the chain:
                        // its outcome is open again; a new final row follows.
                        found.remove(&id);
                    }
                }
            }
            advance(&mut query.after, &page.next_after);
        }
        Ok(tx_ids
            .iter()
            .filter_map(|id| found.get(id).cloned())
            .collect())
    }
}

/// Moves a reader's cursor to a page's `next_after`. The daemon answers
/// null only while the feed is empty: then a reader that asked for `end`
/// reads from the beginning next (the same place, and asking for `end`
/// again could skip a row committed in between); any other cursor stays.
fn advance(after: &mut Option<String>, next_after: &Option<String>) {
    match next_after {
        Some(next) => *after = Some(next.clone()),
        None if after.as_deref() == Some("end") => *after = None,
        None => {}
    }
}

/// No answer, 429 or 5xx: the follower keeps going.
fn is_passing(error: &Error) -> bool {
    match error {
        Error::Transport { .. } => true,
        Error::Api { status, .. } | Error::UnexpectedAnswer { status, .. } => {
            *status == 429 || *status >= 500
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_moves_forward_and_end_becomes_the_beginning_on_an_empty_feed() {
        let mut after = Some("end".to_owned());
        advance(&mut after, &None);
        assert_eq!(after, None, "an empty feed: read it from the beginning");
        let mut after = Some("7-3".to_owned());
        advance(&mut after, &None);
        assert_eq!(after.as_deref(), Some("7-3"), "never rewound");
        advance(&mut after, &Some("9-1".to_owned()));
        assert_eq!(after.as_deref(), Some("9-1"));
    }

    #[test]
    fn only_terminal_events_end_a_wait() {
        let finals: Vec<_> = FeedEvent::ALL
            .into_iter()
            .filter(|e| is_final(*e))
            .collect();
        assert_eq!(
            finals,
            [
                FeedEvent::Confirmed,
                FeedEvent::FailedFinal,
                FeedEvent::Rejected,
                FeedEvent::Cancelled
            ]
        );
    }
}
