//! The operator routes (`/v1/ops/…`, an `ops` token): views and actions,
//! answered as JSON values (README "Operations" documents each shape).

use reqwest::Method;
use serde_json::{json, Value};

use crate::{retry::Repeat, Client, Result};

/// A submitter on a chain, as the submitter actions name it.
///
/// ```
/// let who = txmgr_client::ops::SubmitterRef {
///     address: "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266".into(),
///     chain_id: Some(1),
/// };
/// assert_eq!(who.chain_id, Some(1));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubmitterRef {
    /// The address, `0x` hex.
    pub address: String,
    /// The chain; needed when the daemon serves several.
    pub chain_id: Option<u64>,
}

impl Client {
    /// `GET /v1/ops/{view}`: `actors`, `endpoints`, `cluster`, `database`,
    /// `webhooks`, `history`.
    ///
    /// ```no_run
    /// # async fn demo(txmgr: txmgr_client::Client) -> txmgr_client::Result<()> {
    /// let cluster = txmgr.ops_view("cluster").await?;
    /// println!("{cluster:#}");
    /// # Ok(()) }
    /// ```
    pub async fn ops_view(&self, view: &str) -> Result<Value> {
        self.get_json(&["v1", "ops", view], &[]).await
    }

    /// `POST /v1/ops/submitters/{address}/{action}` with a reason (audited):
    /// `pause`, `resume`, `restart`, `unprotect`. Not repeated after a lost
    /// answer (only after 429 and 503 `busy`).
    ///
    /// ```no_run
    /// # async fn demo(txmgr: txmgr_client::Client) -> txmgr_client::Result<()> {
    /// use txmgr_client::ops::SubmitterRef;
    /// let who = SubmitterRef { address: "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266".into(), chain_id: None };
    /// txmgr.submitter_action(&who, "pause", "key rotation", &[]).await?;
    /// # Ok(()) }
    /// ```
    pub async fn submitter_action(
        &self,
        submitter: &SubmitterRef,
        action: &str,
        reason: &str,
        extra_query: &[(&str, String)],
    ) -> Result<Value> {
        let mut query: Vec<(&str, String)> = submitter
            .chain_id
            .map(|id| ("chain_id", id.to_string()))
            .into_iter()
            .collect();
        query.extend_from_slice(extra_query);
        let body = match action {
            // restart takes no body.
            "restart" => None,
            _ => Some(json!({ "reason": reason })),
        };
        self.send_json(
            Method::POST,
            &["v1", "ops", "submitters", &submitter.address, action],
            &query,
            body.as_ref(),
            Repeat::RefusedOnly,
            None,
        )
        .await
        .map(|(_, answer)| answer)
    }

    /// `POST /v1/ops/webhooks/{name}/redeliver`: one dead letter (`id`) or
    /// all of the webhook's (`None`).
    ///
    /// ```no_run
    /// # async fn demo(txmgr: txmgr_client::Client) -> txmgr_client::Result<()> {
    /// txmgr.redeliver("backend", None).await?;
    /// # Ok(()) }
    /// ```
    pub async fn redeliver(&self, webhook: &str, id: Option<i64>) -> Result<Value> {
        let body = match id {
            Some(id) => json!({ "id": id }),
            None => json!({ "all": true }),
        };
        self.send_json(
            Method::POST,
            &["v1", "ops", "webhooks", webhook, "redeliver"],
            &[],
            Some(&body),
            Repeat::RefusedOnly,
            None,
        )
        .await
        .map(|(_, answer)| answer)
    }

    /// `POST /v1/ops/reload`: re-reads the node's configuration file (as
    /// SIGHUP); a rejected file is [`Error::Api`](crate::Error::Api)
    /// `invalid_config` with every issue in `detail.issues`.
    ///
    /// ```no_run
    /// # async fn demo(txmgr: txmgr_client::Client) -> txmgr_client::Result<()> {
    /// let report = txmgr.reload().await?;
    /// # Ok(()) }
    /// ```
    pub async fn reload(&self) -> Result<Value> {
        self.send_json(
            Method::POST,
            &["v1", "ops", "reload"],
            &[],
            None::<&()>,
            Repeat::RefusedOnly,
            None,
        )
        .await
        .map(|(_, answer)| answer)
    }
}
