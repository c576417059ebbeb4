//! `txmgr feed tail [--follow]`.

use clap::Subcommand;
use txmgr_client::{Client, FeedQuery, Flow};

use super::{exit, render, Failure};

/// Completion feed commands.
#[derive(Debug, Subcommand)]
pub(crate) enum FeedCommand {
    /// Print the feed's rows after a cursor; with --follow, keep waiting for new ones.
    Tail {
        /// Keep following (long polls) until interrupted.
        #[arg(long)]
        follow: bool,
        /// Only this chain (repeatable; an id).
        #[arg(long = "chain")]
        chains: Vec<u64>,
        /// Start after this cursor; `end` = only what completes from now on
        /// (default: the oldest row kept).
        #[arg(long)]
        after: Option<String>,
        /// Rows per page.
        #[arg(long)]
        limit: Option<u32>,
        /// Also funds events (LOW_BALANCE, BALANCE_RESTORED).
        #[arg(long)]
        funds: bool,
    },
}

impl FeedCommand {
    /// Runs the command; the exit code. With `json`, one JSON row per line.
    pub(crate) async fn run(self, client: Client, json: bool) -> Result<u8, Failure> {
        let FeedCommand::Tail {
            follow,
            chains,
            after,
            limit,
            funds,
        } = self;
        let query = FeedQuery {
            after,
            chain_ids: chains,
            limit,
            wait: None,
            funds,
        };
        if !follow {
            let page = client.completions(&query).await?;
            if json {
                render::json(&page);
            } else {
                render::feed_table(&page.items, true);
                if let Some(next) = &page.next_after {
                    eprintln!("next: --after {next}");
                }
            }
            return Ok(exit::OK);
        }
        let mut header = !json;
        client
            .follow(query, |page| {
                if json {
                    for row in &page.items {
                        match serde_json::to_string(row) {
                            Ok(line) => println!("{line}"),
                            Err(e) => eprintln!("txmgr: {e}"),
                        }
                    }
                } else {
                    render::feed_table(&page.items, std::mem::take(&mut header));
                }
                std::future::ready(Flow::Continue)
            })
            .await?;
        Ok(exit::OK)
    }
}
