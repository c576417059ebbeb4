//! `txmgr tx send|get|list|cancel|speedup|rebroadcast|wait`.

use std::time::Duration;

use clap::Subcommand;
use txmgr_client::{
    api::{CompletionRow, CreateBody, FeedEvent, TxState, TxView},
    Client, Error, ListQuery,
};
use uuid::Uuid;

use super::{duration, exit, render, Failure};

/// Transaction commands.
#[derive(Debug, Subcommand)]
pub(crate) enum TxCommand {
    /// Create an intent (a request id is generated when none is given and
    /// reused by every retry; it is printed so you can repeat the send).
    Send {
        /// The signing address.
        #[arg(long)]
        submitter: String,
        /// The recipient (absent: contract creation from --data).
        #[arg(long)]
        to: Option<String>,
        /// Wei to send, decimal or 0x hex (the daemon checks it).
        #[arg(long, allow_hyphen_values = true)]
        value: Option<String>,
        /// Call data or init code, 0x hex.
        #[arg(long)]
        data: Option<String>,
        /// Fixed gas limit (default: estimated).
        #[arg(long)]
        gas_limit: Option<u64>,
        /// The chain (needed when the daemon serves several).
        #[arg(long)]
        chain_id: Option<u64>,
        /// Idempotency key: sending again with it never sends twice.
        #[arg(long)]
        request_id: Option<String>,
        /// Send only through the chain's private endpoints.
        #[arg(long)]
        private: bool,
        /// Deadline, RFC 3339.
        #[arg(long)]
        valid_until: Option<String>,
        /// Show progress until the final state (exit 0 only if CONFIRMED).
        #[arg(long)]
        wait: bool,
        /// How long --wait waits.
        #[arg(long, default_value = "10m", value_parser = duration)]
        timeout: Duration,
    },
    /// Show one transaction, by id or by submitter and request id.
    Get {
        /// The intent's id.
        #[arg(required_unless_present = "request_id")]
        tx_id: Option<Uuid>,
        /// With --request-id: the submitter.
        #[arg(long, requires = "request_id")]
        submitter: Option<String>,
        /// The request id given at creation.
        #[arg(long, requires = "submitter", conflicts_with = "tx_id")]
        request_id: Option<String>,
        /// The chain (with --request-id, when several are served).
        #[arg(long)]
        chain_id: Option<u64>,
    },
    /// List a submitter's transactions, in acceptance order.
    List {
        /// The submitter.
        #[arg(long)]
        submitter: String,
        /// Only this state (QUEUED, TRACKING, STUCK, CONFIRMED, …).
        #[arg(long, value_parser = parse_state)]
        state: Option<TxState>,
        /// Only this chain (repeatable).
        #[arg(long = "chain-id")]
        chain_ids: Vec<u64>,
        /// Page size.
        #[arg(long)]
        limit: Option<u32>,
        /// Continue after this cursor (a previous page's `next`).
        #[arg(long)]
        after: Option<String>,
        /// Follow `next` to the last page.
        #[arg(long)]
        all: bool,
    },
    /// Cancel an intent.
    Cancel {
        /// The intent's id.
        tx_id: Uuid,
        /// Why (audited).
        #[arg(long)]
        reason: Option<String>,
    },
    /// Ask for a fee bump now.
    Speedup {
        /// The intent's id.
        tx_id: Uuid,
        /// Why (audited).
        #[arg(long)]
        reason: Option<String>,
    },
    /// Ask for the signed bytes to be sent again now.
    Rebroadcast {
        /// The intent's id.
        tx_id: Uuid,
        /// Why (audited).
        #[arg(long)]
        reason: Option<String>,
    },
    /// Wait until the intents are final (exit 0 only if all CONFIRMED).
    Wait {
        /// The intents' ids (several: read from the completion feed).
        #[arg(required = true)]
        tx_ids: Vec<Uuid>,
        /// How long to wait.
        #[arg(long, default_value = "10m", value_parser = duration)]
        timeout: Duration,
        /// Several ids: start the feed after this cursor (a `feed tail` cursor
        /// taken before the sends; default: the oldest row kept).
        #[arg(long)]
        after: Option<String>,
    },
}

fn parse_state(value: &str) -> Result<TxState, String> {
    value
        .to_ascii_uppercase()
        .parse()
        .map_err(|e: txmgr_client::api::UnknownState| e.to_string())
}

impl TxCommand {
    /// Runs the command; the exit code.
    pub(crate) async fn run(self, client: Client, json: bool) -> Result<u8, Failure> {
        match self {
            TxCommand::Send {
                submitter,
                to,
                value,
                data,
                gas_limit,
                chain_id,
                request_id,
                private,
                valid_until,
                wait,
                timeout,
            } => {
                let request_id = request_id.unwrap_or_else(|| Uuid::new_v4().to_string());
                // Whatever happens next, the id to repeat the send with is shown.
                let again = |failure: Failure| {
                    if !failure.outcome_unknown() {
                        return failure;
                    }
                    failure.context(format!(
                        "request_id {request_id}: send again with --request-id {request_id}; \
                         it never sends twice"
                    ))
                };
                let body = CreateBody {
                    chain_id,
                    submitter,
                    request_id: Some(request_id.clone()),
                    to,
                    value: value.map(Into::into),
                    data,
                    gas_limit,
                    private: private.then_some(true),
                    valid_until,
                    ..CreateBody::default()
                };
                let created = client.create(body).await.map_err(|e| again(e.into()))?;
                if !wait {
                    if json {
                        render::json(&created.body);
                    } else {
                        let replay = if created.replayed {
                            " (already stored: replay)"
                        } else {
                            ""
                        };
                        println!(
                            "{} {}{replay}  request_id {}",
                            created.body.tx_id,
                            created.body.state,
                            created.body.request_id.as_deref().unwrap_or("-")
                        );
                    }
                    return Ok(exit::OK);
                }
                eprintln!("{} accepted (request_id {request_id})", created.body.tx_id);
                let tx = watch(&client, created.body.tx_id, timeout, !json)
                    .await
                    .map_err(again)?;
                finish(&tx, json)
            }
            TxCommand::Get {
                tx_id,
                submitter,
                request_id,
                chain_id,
            } => {
                let tx = match (tx_id, submitter, request_id) {
                    (Some(id), _, _) => client.get(id).await?,
                    (None, Some(submitter), Some(request_id)) => {
                        client
                            .get_by_request_id(&submitter, &request_id, chain_id)
                            .await?
                    }
                    _ => {
                        return Err(Failure::usage(
                            "give a tx id, or --submitter and --request-id",
                        ))
                    }
                };
                if json {
                    render::json(&tx);
                } else {
                    render::tx(&tx);
                }
                Ok(exit::OK)
            }
            TxCommand::List {
                submitter,
                state,
                chain_ids,
                limit,
                after,
                all,
            } => {
                let mut query = ListQuery {
                    submitter,
                    chain_ids,
                    state,
                    limit,
                    after,
                };
                let mut items = Vec::new();
                let next = loop {
                    let page = client.list(&query).await?;
                    items.extend(page.items);
                    match page.next {
                        Some(next) if all => query.after = Some(next),
                        next => break next,
                    }
                };
                if json {
                    render::json(&serde_json::json!({ "items": items, "next": next }));
                } else {
                    render::tx_table(&items);
                    if let Some(next) = next {
                        eprintln!("more: --after {next}");
                    }
                }
                Ok(exit::OK)
            }
            TxCommand::Cancel { tx_id, reason } => {
                action(client.cancel(tx_id, reason.as_deref()).await?, json)
            }
            TxCommand::Speedup { tx_id, reason } => {
                action(client.speed_up(tx_id, reason.as_deref()).await?, json)
            }
            TxCommand::Rebroadcast { tx_id, reason } => {
                action(client.rebroadcast(tx_id, reason.as_deref()).await?, json)
            }
            TxCommand::Wait {
                tx_ids,
                timeout,
                after,
            } => {
                if let [tx_id] = tx_ids[..] {
                    let tx = watch(&client, tx_id, timeout, !json).await?;
                    return finish(&tx, json);
                }
                let rows = match after {
                    Some(after) => {
                        client
                            .wait_final_many(&tx_ids, Some(after), timeout)
                            .await?
                    }
                    None => wait_from_now(&client, &tx_ids, timeout).await?,
                };
                if json {
                    render::json(&rows);
                } else {
                    render::feed_table(&rows, true);
                }
                let all_confirmed = rows.iter().all(|row| row.state == FeedEvent::Confirmed);
                Ok(if all_confirmed {
                    exit::OK
                } else {
                    exit::NOT_CONFIRMED
                })
            }
        }
    }
}

/// Several ids without a cursor: the feed's end first, then one read per id
/// (those already final are done: their rows may be older than the feed
/// keeps), then the feed from that end for the rest — nothing completing in
/// between is missed, since the end was taken before the reads.
async fn wait_from_now(
    client: &Client,
    tx_ids: &[Uuid],
    timeout: Duration,
) -> Result<Vec<CompletionRow>, Failure> {
    let end = client.feed_end().await?;
    let mut done = Vec::new();
    let mut pending = Vec::new();
    for &tx_id in tx_ids {
        let tx = client.get(tx_id).await?;
        match FeedEvent::of_state(tx.state).filter(|_| tx.state.is_terminal()) {
            Some(event) => done.push((tx_id, final_row(&tx, event))),
            None => pending.push(tx_id),
        }
    }
    let mut rows = if pending.is_empty() {
        Vec::new()
    } else {
        client.wait_final_many(&pending, end, timeout).await?
    };
    rows.extend(done.into_iter().map(|(_, row)| row));
    // In the order the ids were given.
    rows.sort_by_key(|row| tx_ids.iter().position(|id| Some(*id) == row.tx_id));
    Ok(rows)
}

/// A final transaction as a feed row would show it (no cursor: read, not fed).
fn final_row(tx: &TxView, event: FeedEvent) -> CompletionRow {
    CompletionRow {
        cursor: "-".to_owned(),
        chain_id: tx.chain_id,
        tx_id: Some(tx.tx_id),
        submitter: tx.submitter.clone(),
        request_id: tx.request_id.clone(),
        state: event,
        tx_hash: tx.mined_tx_hash.clone().or_else(|| tx.tx_hash.clone()),
        block_number: tx
            .receipt
            .as_ref()
            .and_then(|r| i64::try_from(r.block_number).ok()),
        nonce: tx.nonce.and_then(|n| i64::try_from(n).ok()),
        reason: tx.last_error.clone(),
        balance_wei: None,
        min_balance_wei: None,
        completed_at: tx.confirmed_at.unwrap_or(tx.updated_at),
    }
}

fn action(answer: txmgr_client::api::ActionAccepted, json: bool) -> Result<u8, Failure> {
    if json {
        render::json(&answer);
    } else {
        println!(
            "{} {}: {} (state {})",
            answer.tx_id, answer.action, answer.status, answer.state
        );
    }
    Ok(exit::OK)
}

/// Prints the final transaction; exit 0 for CONFIRMED, 7 for another final state.
fn finish(tx: &TxView, json: bool) -> Result<u8, Failure> {
    if json {
        render::json(tx);
    } else {
        render::tx(tx);
    }
    Ok(if tx.state == TxState::Confirmed {
        exit::OK
    } else {
        exit::NOT_CONFIRMED
    })
}

/// Reads the transaction until it is final, printing each change of state
/// on stderr when `progress`.
async fn watch(
    client: &Client,
    tx_id: Uuid,
    timeout: Duration,
    progress: bool,
) -> Result<TxView, Failure> {
    let start = tokio::time::Instant::now();
    let mut shown = String::new();
    let mut pause = Duration::from_millis(200);
    loop {
        let tx = client.get(tx_id).await?;
        let now = render::state_text(&tx);
        if progress && now != shown {
            let hash = tx
                .tx_hash
                .as_deref()
                .map(|h| format!(" {h}"))
                .unwrap_or_default();
            eprintln!("{:>7.1}s  {now}{hash}", start.elapsed().as_secs_f64());
            shown = now;
        }
        if tx.state.is_terminal() {
            return Ok(tx);
        }
        if start.elapsed() >= timeout {
            return Err(Error::WaitTimeout {
                pending: vec![tx_id],
                waited: start.elapsed(),
            }
            .into());
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_secs(1));
    }
}
