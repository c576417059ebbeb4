//! Intent bodies the HTTP tests post, so a change to the wire shape of a
//! plain transfer is made once.

use serde_json::{json, Value};

use super::txs::TO;

/// Dev account 0 as the API echoes it (lowercase hex): the submitter of most
/// tests, funded by every dev chain and keyed in every test config.
pub(crate) const DEV: &str = "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266";

/// A 1-wei transfer from [`DEV`] to [`TO`] under `request_id`.
pub(crate) fn transfer(request_id: &str) -> Value {
    transfer_from(DEV, request_id)
}

/// A 1-wei transfer from `submitter` to [`TO`] under `request_id`.
pub(crate) fn transfer_from(submitter: &str, request_id: &str) -> Value {
    json!({"submitter": submitter, "to": TO, "value": "1", "request_id": request_id})
}

/// Queues `count` transfers from [`DEV`] (request ids `{prefix}{i}`) while
/// the submitter is paused, then resumes it: its leader finds a backlog of
/// full batches at once.
pub(crate) async fn paused_backlog(node: &super::node::TestNode, prefix: &str, count: i64) {
    let pause = format!("/v1/ops/submitters/{DEV}/pause");
    let (status, answer) = node
        .request("POST", &pause, Some(json!({"reason": "backlog"})))
        .await;
    assert_eq!(status, 200, "{answer}");
    for i in 0..count {
        let (status, answer) = node
            .request(
                "POST",
                "/v1/transactions",
                Some(transfer(&format!("{prefix}{i}"))),
            )
            .await;
        assert_eq!(status, 202, "{answer}");
    }
    let resume = format!("/v1/ops/submitters/{DEV}/resume");
    let (status, answer) = node
        .request("POST", &resume, Some(json!({"reason": "go"})))
        .await;
    assert_eq!(status, 200, "{answer}");
}
