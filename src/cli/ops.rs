//! `txmgr ops …`: the operator views and actions (an `ops` token).

use clap::Subcommand;
use txmgr_client::{ops::SubmitterRef, Client};

use super::{exit, render, Failure};

/// Operator commands.
#[derive(Debug, Subcommand)]
pub(crate) enum OpsCommand {
    /// Every actor and mailbox of the answering node.
    Actors,
    /// RPC endpoints and their health.
    Endpoints,
    /// Nodes, leases and which node owns each submitter.
    Cluster,
    /// Webhooks, their lag and dead letters.
    Webhooks,
    /// Stop taking new nonces for a submitter (audited).
    Pause {
        /// The submitter.
        address: String,
        /// Why.
        #[arg(long)]
        reason: String,
        /// The chain (when several are served).
        #[arg(long)]
        chain_id: Option<u64>,
        /// Also stop re-broadcasts and fee bumps of in-flight intents.
        #[arg(long)]
        halt_resubmits: bool,
    },
    /// Resume a paused submitter (audited).
    Resume {
        /// The submitter.
        address: String,
        /// Why.
        #[arg(long)]
        reason: String,
        /// The chain (when several are served).
        #[arg(long)]
        chain_id: Option<u64>,
    },
    /// Restart a submitter's actor on the node that holds it.
    Restart {
        /// The submitter.
        address: String,
        /// The chain (when several are served).
        #[arg(long)]
        chain_id: Option<u64>,
    },
    /// Clear PROTECT after an external nonce use (audited).
    Unprotect {
        /// The submitter.
        address: String,
        /// Why.
        #[arg(long)]
        reason: String,
        /// The chain (when several are served).
        #[arg(long)]
        chain_id: Option<u64>,
    },
    /// Deliver a webhook's dead letters again (one by --id, or all).
    Redeliver {
        /// The webhook's name.
        webhook: String,
        /// One dead letter's id (from `txmgr ops webhooks`); default all.
        #[arg(long)]
        id: Option<i64>,
    },
    /// Re-read the node's configuration file (as SIGHUP).
    Reload,
}

impl OpsCommand {
    /// Runs the command; the exit code.
    pub(crate) async fn run(self, client: Client, json: bool) -> Result<u8, Failure> {
        let answer = match self {
            OpsCommand::Actors => client.ops_view("actors").await?,
            OpsCommand::Endpoints => client.ops_view("endpoints").await?,
            OpsCommand::Cluster => client.ops_view("cluster").await?,
            OpsCommand::Webhooks => client.ops_view("webhooks").await?,
            OpsCommand::Pause {
                address,
                reason,
                chain_id,
                halt_resubmits,
            } => {
                let extra = [("halt_resubmits", halt_resubmits.to_string())];
                let extra = if halt_resubmits { &extra[..] } else { &[] };
                let who = SubmitterRef { address, chain_id };
                client
                    .submitter_action(&who, "pause", &reason, extra)
                    .await?
            }
            OpsCommand::Resume {
                address,
                reason,
                chain_id,
            } => {
                let who = SubmitterRef { address, chain_id };
                client
                    .submitter_action(&who, "resume", &reason, &[])
                    .await?
            }
            OpsCommand::Restart { address, chain_id } => {
                let who = SubmitterRef { address, chain_id };
                client.submitter_action(&who, "restart", "", &[]).await?
            }
            OpsCommand::Unprotect {
                address,
                reason,
                chain_id,
            } => {
                let who = SubmitterRef { address, chain_id };
                client
                    .submitter_action(&who, "unprotect", &reason, &[])
                    .await?
            }
            OpsCommand::Redeliver { webhook, id } => client.redeliver(&webhook, id).await?,
            OpsCommand::Reload => client.reload().await?,
        };
        if json {
            render::json(&answer);
        } else {
            render::value(&answer);
        }
        Ok(exit::OK)
    }
}
