//! Secrets that can be rotated (README "Security"): a webhook's
//! `secret_file` is read again on every reload — after the file changes and
//! the node reloads, the next delivery verifies with the new secret only —
//! and a submitter added by a reload takes its key from a `key_file` (a
//! running process's environment cannot be given a new variable).

use std::{path::PathBuf, time::Duration};

use serde_json::json;
use txmgr_actors::webhook::signature;

use crate::common::{
    node::{config_toml, TestNode},
    receiver::Receiver,
    wait_until, Anvil, TestDb, DEV,
};

const SECOND: &str = "0x70997970c51812dc3a010c7d01b50e0d17dc79c8";
const SECOND_KEY: &str = "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d";
const TO: &str = "0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc";
const WITHIN: Duration = Duration::from_secs(60);

/// Files of this test, removed at the end.
struct Files(PathBuf);

impl Files {
    fn new() -> Self {
        let dir = std::env::temp_dir().join(format!("txmgr-rotation-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).expect("dir");
        Self(dir)
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, text).expect("write");
        path
    }
}

impl Drop for Files {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

async fn create(node: &TestNode, submitter: &str, request_id: &str) {
    let body = json!({"submitter": submitter, "to": TO, "value": "1", "request_id": request_id});
    let (status, answer) = node.request("POST", "/v1/transactions", Some(body)).await;
    assert_eq!(status, 202, "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_rotated_secret_file_signs_the_next_delivery_and_a_key_file_serves_a_new_submitter() {
    let files = Files::new();
    let secret = files.write("hook.secret", "old-secret\n");
    let db = TestDb::migrated().await;
    let anvil = Anvil::start_with(&["--block-time", "0.2"]).await;
    let receiver = Receiver::always_ok().await;
    let base = config_toml(
        &db.url,
        &anvil.rpc_url(),
        "n1",
        "finality = { confirmations = 1 }",
    ) + &format!(
        "\n[[webhooks]]\nname = \"hook\"\nurl = \"{}\"\nsecret_file = \"{}\"\nstart_at = \"beginning\"\n",
        receiver.url,
        secret.display()
    );
    let config = files.write("node.toml", &base);
    let node = TestNode::start_file(&config).await;

    create(&node, DEV, "before").await;
    wait_until(WITHIN, || async { receiver.delivered().len() == 1 }).await;
    let first = &receiver.delivered()[0];
    assert!(signature::verify(
        b"old-secret",
        &first.signature,
        &first.body,
        now(),
        300
    ));

    // Rotate: the new secret in the file, and a second submitter whose key
    // is in a file, then reload.
    files.write("hook.secret", "new-secret\n");
    let key = files.write("second.key", &format!("{SECOND_KEY}\n"));
    files.write(
        "node.toml",
        &format!(
            "{base}\n[submitters.\"{SECOND}\"]\nsigner = {{ kind = \"env\", key_file = \"{}\" }}\nfinality = {{ confirmations = 1 }}\n",
            key.display()
        ),
    );
    let (status, report) = node.request("POST", "/v1/ops/reload", None).await;
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["added"], json!([SECOND]), "{report}");

    create(&node, DEV, "after").await;
    create(&node, SECOND, "second").await;
    wait_until(WITHIN, || async { receiver.delivered().len() == 3 }).await;
    for delivery in &receiver.delivered()[1..] {
        assert!(
            signature::verify(
                b"new-secret",
                &delivery.signature,
                &delivery.body,
                now(),
                300
            ),
            "{}",
            delivery.json
        );
        assert!(
            !signature::verify(
                b"old-secret",
                &delivery.signature,
                &delivery.body,
                now(),
                300
            ),
            "the old secret no longer signs"
        );
    }
    let confirmed_second = receiver
        .delivered()
        .iter()
        .any(|d| d.json["submitter"] == SECOND && d.json["state"] == "CONFIRMED");
    assert!(
        confirmed_second,
        "the key_file submitter sent and confirmed"
    );
    node.stop().await;
}
