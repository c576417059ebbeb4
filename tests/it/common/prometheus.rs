//! A real Prometheus (Debian's `prometheus`) scraping txmgr daemons every
//! second with the shipped rules (`deploy/prometheus/txmgr-rules.yml`),
//! evaluated every second; asked through its HTTP API.

use std::{path::PathBuf, process::Stdio, time::Duration};

use serde_json::Value;
use tokio::process::{Child, Command};

use super::{free_port, wait_until};

/// One Prometheus process with its own storage directory.
pub(crate) struct Prometheus {
    /// `http://127.0.0.1:<port>`.
    pub(crate) base: String,
    dir: PathBuf,
    child: Child,
    client: reqwest::Client,
}

/// The shipped rule file.
pub(crate) fn rules_file() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("deploy/prometheus/txmgr-rules.yml")
}

impl Prometheus {
    /// Starts Prometheus scraping `targets` (`host:port`) as job `txmgr`;
    /// returns once it is ready. A missing binary fails the test.
    pub(crate) async fn start(targets: &[String]) -> Prometheus {
        let dir =
            std::env::temp_dir().join(format!("txmgr-prom-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).expect("prometheus dir");
        let targets: Vec<String> = targets.iter().map(|t| format!("\"{t}\"")).collect();
        let config = format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
             rule_files:\n  - \"{rules}\"\n\
             scrape_configs:\n  - job_name: txmgr\n    static_configs:\n      - targets: [{targets}]\n",
            rules = rules_file().display(),
            targets = targets.join(", "),
        );
        let config_path = dir.join("prometheus.yml");
        std::fs::write(&config_path, config).expect("prometheus config");
        let port = free_port();
        let log = std::fs::File::create(dir.join("prometheus.log")).expect("prometheus log");
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config_path.display()))
            .arg(format!("--storage.tsdb.path={}", dir.join("data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .expect("prometheus (Debian package `prometheus`) must be installed: scripts/test.sh installs it");
        let prometheus = Prometheus {
            base: format!("http://127.0.0.1:{port}"),
            dir,
            child,
            client: reqwest::Client::new(),
        };
        let ready = format!("{}/-/ready", prometheus.base);
        let client = prometheus.client.clone();
        wait_until(Duration::from_secs(30), || async {
            client
                .get(&ready)
                .send()
                .await
                .is_ok_and(|r| r.status().is_success())
        })
        .await;
        prometheus
    }

    /// `GET /api/v1/<path>`'s `data`, or `Null` when it fails.
    pub(crate) async fn api(&self, path: &str) -> Value {
        let Ok(response) = self
            .client
            .get(format!("{}/api/v1/{path}", self.base))
            .send()
            .await
        else {
            return Value::Null;
        };
        let body: Value = response.json().await.unwrap_or(Value::Null);
        body["data"].clone()
    }

    /// An instant query's result vector (empty on any error).
    pub(crate) async fn query(&self, promql: &str) -> Result<Vec<Value>, String> {
        let url = reqwest::Url::parse_with_params(
            &format!("{}/api/v1/query", self.base),
            &[("query", promql)],
        )
        .map_err(|e| e.to_string())?;
        let response = self
            .client
            .get(url)
            .send()
            .await
            .map_err(|e| e.to_string())?;
        let body: Value = response.json().await.map_err(|e| e.to_string())?;
        if body["status"] != "success" {
            return Err(format!("{promql}: {body}"));
        }
        Ok(body["data"]["result"]
            .as_array()
            .cloned()
            .unwrap_or_default())
    }

    /// The values of `label` on the series matching `selector`.
    pub(crate) async fn label_values(&self, selector: &str, label: &str) -> Vec<String> {
        let Ok(url) = reqwest::Url::parse_with_params(
            &format!("{}/api/v1/label/{label}/values", self.base),
            &[("match[]", selector)],
        ) else {
            return Vec::new();
        };
        let Ok(response) = self.client.get(url).send().await else {
            return Vec::new();
        };
        let body: Value = response.json().await.unwrap_or(Value::Null);
        body["data"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect()
    }

    /// The state (`pending` / `firing`) of each active alert named `name`.
    pub(crate) async fn alert_states(&self, name: &str) -> Vec<String> {
        self.api("alerts").await["alerts"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|a| a["labels"]["alertname"] == name)
            .filter_map(|a| a["state"].as_str().map(str::to_owned))
            .collect()
    }

    /// Waits until alert `name` is in one of `states` (`[]`: inactive);
    /// returns how long that took.
    pub(crate) async fn wait_alert(
        &self,
        name: &str,
        states: &[&str],
        within: Duration,
    ) -> Duration {
        let started = std::time::Instant::now();
        wait_until(within, || async {
            let now = self.alert_states(name).await;
            if states.is_empty() {
                now.is_empty()
            } else {
                now.iter().any(|s| states.contains(&s.as_str()))
            }
        })
        .await;
        started.elapsed()
    }

    /// Its log, for a failure message.
    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("prometheus.log")).unwrap_or_default()
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// One real daemon ("n1") watched by a real Prometheus: dev account 0 as
/// its submitter with `min_balance` 100 ETH, a webhook "ops" to
/// `receiver_url` (quick retries), anvil mining every 0.5 s.
pub(crate) struct Observed {
    pub(crate) cluster: super::cluster::Cluster,
    pub(crate) prometheus: Prometheus,
}

/// Wei per ether.
pub(crate) const ETH: u128 = 1_000_000_000_000_000_000;

impl Observed {
    /// Starts the node and Prometheus; returns once Prometheus scrapes it.
    pub(crate) async fn start(receiver_url: &str) -> Observed {
        const SECRET_VAR: &str = "TXMGR_OBSERVED_HOOK_SECRET";
        std::env::set_var(SECRET_VAR, "observed-secret");
        let spec = super::cluster::ClusterSpec {
            nodes: vec![],
            submitters: vec![0],
            strict: vec![],
            node_extra: "",
            confirmations: 1,
        };
        let anvil = super::Anvil::start_with(&["--block-time", "0.5"]).await;
        let mut cluster = super::cluster::Cluster::start(spec, anvil, None).await;
        let hook = format!(
            "\n[[webhooks]]\nname = \"ops\"\nurl = \"{receiver_url}\"\nsecret_env = \"{SECRET_VAR}\"\n\
             backoff_initial = \"100ms\"\nbackoff_max = \"1s\"\nmax_attempts = 100\n"
        );
        cluster
            .add_node_with("n1", |config| {
                config.replace(
                    "[defaults]\n",
                    &format!("[defaults]\nmin_balance = \"{}\"\n", 100 * ETH),
                ) + &hook
            })
            .await;
        let port = cluster.node_ref("n1").port;
        let prometheus = Prometheus::start(&[format!("127.0.0.1:{port}")]).await;
        wait_until(Duration::from_secs(30), || async {
            prometheus
                .query("up{job=\"txmgr\"} == 1")
                .await
                .is_ok_and(|r| r.len() == 1)
        })
        .await;
        Observed {
            cluster,
            prometheus,
        }
    }

    /// `count` 1-wei transfers from the submitter, request ids `prefix-i`.
    pub(crate) async fn transfers(&self, prefix: &str, count: usize) {
        let base = self.cluster.node_ref("n1").base();
        for i in 0..count {
            let response = self
                .cluster
                .client
                .post(format!("{base}/v1/transactions"))
                .json(&serde_json::json!({"submitter": super::daemon::DEV_KEYS[0].1,
                    "to": super::cluster::SINK, "value": "1", "request_id": format!("{prefix}-{i}")}))
                .send()
                .await
                .expect("create");
            assert_eq!(response.status().as_u16(), 202);
        }
    }
}
