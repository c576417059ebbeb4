//! The cluster tests' load generator: creates sent at a steady rate to
//! random nodes, each retried elsewhere (same request id, so idempotent)
//! until a node acknowledges it.

use std::{
    sync::{Arc, Mutex, RwLock},
    time::Duration,
};

use rand::{rngs::StdRng, Rng, SeedableRng};
use serde_json::{json, Value};
use uuid::Uuid;

use super::cluster::SINK;

/// An acknowledged create.
#[derive(Debug, Clone)]
pub(crate) struct Acked {
    pub(crate) request_id: String,
    pub(crate) tx_id: Uuid,
}

/// Creates sent in the background at a steady rate.
pub(crate) struct Load {
    acked: Arc<Mutex<Vec<Acked>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Load {
    pub(super) fn start(
        client: reqwest::Client,
        bases: Arc<RwLock<Vec<String>>>,
        submitters: Vec<String>,
        total: usize,
        per_second: u32,
        seed: u64,
    ) -> Load {
        let acked = Arc::new(Mutex::new(Vec::new()));
        let sink = acked.clone();
        let task = tokio::spawn(async move {
            let rng = Arc::new(Mutex::new(StdRng::seed_from_u64(seed)));
            let mut sends = Vec::with_capacity(total);
            let mut pace = tokio::time::interval(Duration::from_secs(1) / per_second.max(1));
            for i in 0..total {
                pace.tick().await;
                let body = json!({
                    "submitter": submitters[i % submitters.len()],
                    "request_id": format!("r{i}"),
                    "to": SINK,
                    "value": "1",
                });
                sends.push(tokio::spawn(send_until_acked(
                    client.clone(),
                    bases.clone(),
                    rng.clone(),
                    body,
                    sink.clone(),
                )));
            }
            for send in sends {
                let _ = send.await;
            }
        });
        Load { acked, task }
    }

    /// Creates acknowledged so far.
    pub(crate) fn acked(&self) -> usize {
        self.acked.lock().map(|a| a.len()).unwrap_or(0)
    }

    /// Waits for every create to be acknowledged; returns them.
    pub(crate) async fn finish(self) -> Vec<Acked> {
        tokio::time::timeout(Duration::from_secs(120), self.task)
            .await
            .expect("every create acknowledged within 120 s")
            .expect("load task");
        let acked = self.acked.lock().map(|a| a.clone()).unwrap_or_default();
        acked
    }
}

/// Sends one create to random nodes until one acknowledges it (the same
/// request id each time: a retry is idempotent).
async fn send_until_acked(
    client: reqwest::Client,
    bases: Arc<RwLock<Vec<String>>>,
    rng: Arc<Mutex<StdRng>>,
    body: Value,
    acked: Arc<Mutex<Vec<Acked>>>,
) {
    let request_id = body["request_id"].as_str().unwrap_or_default().to_owned();
    loop {
        let base = {
            let bases = bases.read().map(|b| b.clone()).unwrap_or_default();
            let pick = rng
                .lock()
                .map(|mut r| r.random_range(0..bases.len().max(1)))
                .unwrap_or(0);
            bases.get(pick).cloned()
        };
        let Some(base) = base else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        let answer = client
            .post(format!("{base}/v1/transactions"))
            .json(&body)
            .send()
            .await;
        if let Ok(response) = answer {
            if matches!(response.status().as_u16(), 200 | 202) {
                if let Ok(created) = response.json::<Value>().await {
                    if let Some(tx_id) = created["tx_id"].as_str().and_then(|s| s.parse().ok()) {
                        if let Ok(mut acked) = acked.lock() {
                            acked.push(Acked {
                                request_id: request_id.clone(),
                                tx_id,
                            });
                        }
                        return;
                    }
                }
            }
        }
        // Refused, timed out or the node is down: try again elsewhere.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
