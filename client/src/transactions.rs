//! Create, read, list and act on transactions (README "HTTP API").

use reqwest::{Method, StatusCode};
use txmgr_api::{ActionAccepted, ActionBody, CreateBody, CreatedBody, TxPage, TxState, TxView};
use uuid::Uuid;

use crate::{retry::Repeat, Client, Result};

/// The answer to a create (see [`Client::create`]).
///
/// ```no_run
/// # async fn demo(txmgr: txmgr_client::Client, body: txmgr_client::api::CreateBody) -> txmgr_client::Result<()> {
/// let created = txmgr.create(body).await?;
/// if created.replayed { println!("already stored as {}", created.body.tx_id); }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Created {
    /// What the daemon answered.
    pub body: CreatedBody,
    /// True when the request id was already stored with the same content
    /// (200): this create, or an earlier try of it, made the intent before.
    pub replayed: bool,
}

/// Which transactions [`Client::list`] reads: one submitter's, in
/// acceptance order.
///
/// ```
/// use txmgr_client::{api::TxState, ListQuery};
/// let stuck = ListQuery {
///     submitter: "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266".into(),
///     state: Some(TxState::Stuck),
///     ..Default::default()
/// };
/// assert!(stuck.after.is_none());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListQuery {
    /// The submitter (required).
    pub submitter: String,
    /// Only these chains; every chain served when empty.
    pub chain_ids: Vec<u64>,
    /// Only this state.
    pub state: Option<TxState>,
    /// Page size (daemon default 50, at most 500).
    pub limit: Option<u32>,
    /// The previous page's `next`.
    pub after: Option<String>,
}

impl Client {
    /// Creates an intent (`POST /v1/transactions`).
    ///
    /// A `request_id` is always sent: the body's, or a fresh UUID when it
    /// has none, and every retry reuses it, so a retry after a lost answer
    /// lands on the same intent (answered 200, [`Created::replayed`]). An
    /// error carries the id ([`Error::request_id`](crate::Error::request_id)):
    /// creating again with it is safe.
    ///
    /// ```no_run
    /// # async fn demo(txmgr: txmgr_client::Client) -> txmgr_client::Result<()> {
    /// use txmgr_client::api::CreateBody;
    /// let created = txmgr
    ///     .create(CreateBody {
    ///         submitter: "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266".into(),
    ///         to: Some("0x70997970c51812dc3a010c7d01b50e0d17dc79c8".into()),
    ///         value: Some("1000".into()),
    ///         request_id: Some("invoice-7".into()),
    ///         ..Default::default()
    ///     })
    ///     .await?;
    /// println!("{} is {}", created.body.tx_id, created.body.state);
    /// # Ok(()) }
    /// ```
    pub async fn create(&self, mut body: CreateBody) -> Result<Created> {
        let request_id = body
            .request_id
            .get_or_insert_with(|| Uuid::new_v4().to_string())
            .clone();
        self.send_json(
            Method::POST,
            &["v1", "transactions"],
            &[],
            Some(&body),
            Repeat::Safe,
            None,
        )
        .await
        .map(|(status, body)| Created {
            body,
            replayed: status == StatusCode::OK,
        })
        .map_err(|error| error.with_request_id(&request_id))
    }

    /// One transaction (`GET /v1/transactions/{tx_id}`); 404 `not_found`
    /// (or `aged_out`, removed by history retention) as [`Error::Api`](crate::Error::Api).
    ///
    /// ```no_run
    /// # async fn demo(txmgr: txmgr_client::Client, id: uuid::Uuid) -> txmgr_client::Result<()> {
    /// let tx = txmgr.get(id).await?;
    /// println!("{} nonce {:?}", tx.state, tx.nonce);
    /// # Ok(()) }
    /// ```
    pub async fn get(&self, tx_id: Uuid) -> Result<TxView> {
        self.get_json(&["v1", "transactions", &tx_id.to_string()], &[])
            .await
    }

    /// The submitter's transaction with this request id
    /// (`GET /v1/transactions?submitter=…&request_id=…`); `chain_id` is
    /// needed when the daemon serves several chains.
    ///
    /// ```no_run
    /// # async fn demo(txmgr: txmgr_client::Client) -> txmgr_client::Result<()> {
    /// let tx = txmgr
    ///     .get_by_request_id("0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266", "order-42", None)
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub async fn get_by_request_id(
        &self,
        submitter: &str,
        request_id: &str,
        chain_id: Option<u64>,
    ) -> Result<TxView> {
        let mut query = vec![
            ("submitter", submitter.to_owned()),
            ("request_id", request_id.to_owned()),
        ];
        query.extend(chain_id.map(|id| ("chain_id", id.to_string())));
        self.get_json(&["v1", "transactions"], &query).await
    }

    /// One page of a submitter's transactions; follow `next` until it is
    /// `None` (a page may be short because of its byte budget).
    ///
    /// ```no_run
    /// # async fn demo(txmgr: txmgr_client::Client) -> txmgr_client::Result<()> {
    /// use txmgr_client::ListQuery;
    /// let mut query = ListQuery { submitter: "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266".into(), ..Default::default() };
    /// loop {
    ///     let page = txmgr.list(&query).await?;
    ///     for tx in &page.items { println!("{} {}", tx.tx_id, tx.state); }
    ///     match page.next { Some(next) => query.after = Some(next), None => break }
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn list(&self, query: &ListQuery) -> Result<TxPage> {
        let mut pairs = vec![("submitter", query.submitter.clone())];
        pairs.extend(
            query
                .chain_ids
                .iter()
                .map(|id| ("chain_id", id.to_string())),
        );
        pairs.extend(
            query
                .state
                .map(|state| ("state", state.as_str().to_owned())),
        );
        pairs.extend(query.limit.map(|limit| ("limit", limit.to_string())));
        pairs.extend(query.after.clone().map(|after| ("after", after)));
        self.get_json(&["v1", "transactions"], &pairs).await
    }

    /// Cancels the intent (`POST …/cancel`): a QUEUED one at once (`status`
    /// `done`), a sent one by a replacement at its nonce (`requested`).
    /// Repeating a cancel changes nothing (`unchanged`), so it is retried
    /// like a read.
    ///
    /// ```no_run
    /// # async fn demo(txmgr: txmgr_client::Client, id: uuid::Uuid) -> txmgr_client::Result<()> {
    /// let answer = txmgr.cancel(id, Some("customer withdrew the order")).await?;
    /// println!("{}: {}", answer.status, answer.state);
    /// # Ok(()) }
    /// ```
    pub async fn cancel(&self, tx_id: Uuid, reason: Option<&str>) -> Result<ActionAccepted> {
        self.act(tx_id, "cancel", reason, Repeat::Safe).await
    }

    /// Asks for a fee bump now (`POST …/speedup`). Retried only when the
    /// daemon says it did nothing (429, 503 `busy`): a repeat after a lost
    /// answer could bump twice.
    ///
    /// ```no_run
    /// # async fn demo(txmgr: txmgr_client::Client, id: uuid::Uuid) -> txmgr_client::Result<()> {
    /// txmgr.speed_up(id, None).await?;
    /// # Ok(()) }
    /// ```
    pub async fn speed_up(&self, tx_id: Uuid, reason: Option<&str>) -> Result<ActionAccepted> {
        self.act(tx_id, "speedup", reason, Repeat::RefusedOnly)
            .await
    }

    /// Asks for the signed bytes to be sent again now (`POST
    /// …/rebroadcast`); retried as [`Client::speed_up`].
    ///
    /// ```no_run
    /// # async fn demo(txmgr: txmgr_client::Client, id: uuid::Uuid) -> txmgr_client::Result<()> {
    /// txmgr.rebroadcast(id, Some("endpoint was down")).await?;
    /// # Ok(()) }
    /// ```
    pub async fn rebroadcast(&self, tx_id: Uuid, reason: Option<&str>) -> Result<ActionAccepted> {
        self.act(tx_id, "rebroadcast", reason, Repeat::RefusedOnly)
            .await
    }

    /// Queues again an intent whose nonce was consumed by another
    /// transaction (`POST …/requeue`); retried as [`Client::speed_up`].
    ///
    /// ```no_run
    /// # async fn demo(txmgr: txmgr_client::Client, id: uuid::Uuid) -> txmgr_client::Result<()> {
    /// txmgr.requeue(id, None).await?;
    /// # Ok(()) }
    /// ```
    pub async fn requeue(&self, tx_id: Uuid, reason: Option<&str>) -> Result<ActionAccepted> {
        self.act(tx_id, "requeue", reason, Repeat::RefusedOnly)
            .await
    }

    async fn act(
        &self,
        tx_id: Uuid,
        action: &str,
        reason: Option<&str>,
        repeat: Repeat,
    ) -> Result<ActionAccepted> {
        let body = ActionBody {
            reason: reason.map(str::to_owned),
        };
        self.send_json(
            Method::POST,
            &["v1", "transactions", &tx_id.to_string(), action],
            &[],
            Some(&body),
            repeat,
            None,
        )
        .await
        .map(|(_, answer)| answer)
    }
}
