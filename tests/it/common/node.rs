//! An in-process txmgr node (engine + HTTP router) for pipeline tests, and
//! small HTTP helpers that call the router without a socket.

use std::sync::Arc;

use axum::{
    body::{to_bytes, Body},
    http::Request,
    Router,
};
use serde_json::Value;
use tower::ServiceExt;
use txmgr::{
    config::Config,
    daemon::{
        listen_for_served, ops_state, start_chains, ChainHost, ChainRuntime, Reloader, WrapClient,
    },
    http::{app, AppState, CompletionNotifier, Limits},
};
use txmgr_actors::{chain::ChainClient, node::Engine};

/// The environment variable that holds anvil's first dev key in tests.
pub(crate) const KEY_VAR: &str = "TXMGR_TEST_DEV_KEY_0";

/// A chain table's fast polling, as every test node uses (inside
/// `[chain]` or `[chains.<name>]`).
pub(crate) const FAST_POLL: &str = "poll_interval = \"200ms\"\nsweep_interval = \"1s\"";

/// Short leases, so that fail-over tests take seconds; more `[lease]` keys
/// may follow it.
pub(crate) const FAST_LEASE: &str =
    "[lease]\nduration = \"3s\"\nrenew_interval = \"1s\"\nclock_skew_allowance = \"500ms\"";

/// A fast scan for unled work; more `[node]` keys may follow it.
pub(crate) const FAST_NODE: &str = "[node]\ndiscovery_interval = \"1s\"";

/// One `[[auth.tokens]]` entry: `token` (stored as its hash) named `name`
/// with `role`, limited to `submitters` when any are given.
pub(crate) fn token_toml(name: &str, role: &str, token: &str, submitters: &[&str]) -> String {
    let mut entry = format!(
        "[[auth.tokens]]\nname = \"{name}\"\nrole = \"{role}\"\nsha256 = \"{}\"\n",
        txmgr::http::auth::token_hash_hex(token)
    );
    if !submitters.is_empty() {
        let list: Vec<String> = submitters.iter().map(|s| format!("\"{s}\"")).collect();
        entry.push_str(&format!("submitters = [{}]\n", list.join(", ")));
    }
    entry
}

/// Base configuration: fast timers so tests finish quickly.
pub(crate) fn config_toml(
    db_url: &str,
    rpc_url: &str,
    node_id: &str,
    submitter_extra: &str,
) -> String {
    format!(
        r#"
node_id = "{node_id}"
[database]
url = "{db_url}"
max_connections = 8
[chain]
rpc_url = "{rpc_url}"
chain_id = 31337
{FAST_POLL}
{FAST_LEASE}
{FAST_NODE}
[submitters."{address}"]
signer = {{ kind = "env", env = "{KEY_VAR}" }}
{submitter_extra}
"#,
        address = super::DEV_ADDRESS_0.to_lowercase(),
    )
}

/// One node: its engines and its router.
pub(crate) struct TestNode {
    /// The first chain's engine (the only one of a `[chain]` configuration).
    pub(crate) engine: Engine,
    /// Every chain's runtime at start.
    pub(crate) chains: Vec<ChainRuntime>,
    /// The chains running now (a reload may add or remove one).
    host: Arc<ChainHost>,
    pub(crate) app: Router,
    listener: tokio::task::JoinHandle<()>,
    webhooks: txmgr_actors::webhook::Webhooks,
    wakes: tokio::task::JoinHandle<()>,
}

impl TestNode {
    /// Starts a node from a TOML configuration.
    pub(crate) async fn start(toml: &str) -> TestNode {
        Self::start_with(toml, |chain| chain).await
    }

    /// Starts a node whose chain client is wrapped by `wrap` (fault injection).
    pub(crate) async fn start_with(
        toml: &str,
        wrap: impl FnOnce(Arc<dyn ChainClient>) -> Arc<dyn ChainClient> + Send,
    ) -> TestNode {
        Self::start_full(toml, wrap, None).await
    }

    /// Starts a node from a configuration file, with reload enabled.
    pub(crate) async fn start_file(path: &std::path::Path) -> TestNode {
        let toml = std::fs::read_to_string(path).expect("config file");
        Self::start_full(&toml, |chain| chain, Some(path.to_path_buf())).await
    }

    async fn start_full(
        toml: &str,
        wrap: impl FnOnce(Arc<dyn ChainClient>) -> Arc<dyn ChainClient> + Send,
        file: Option<std::path::PathBuf>,
    ) -> TestNode {
        // RUST_LOG=txmgr=debug shows the engine's logs in a failing test.
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
        // Every test sets the same, public, dev key: no race on its value.
        std::env::set_var(KEY_VAR, super::DEV_PRIVATE_KEY_0);
        let config = Config::from_toml_str(toml, std::iter::empty::<(String, String)>())
            .unwrap_or_else(|e| panic!("test config invalid:\n{e}"));
        let pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(config.database.max_connections)
            .connect(&config.database.url)
            .await
            .expect("node pool");
        // A fresh process identity, as a restarted daemon would draw.
        let owner = txmgr_actors::LeaseOwner::for_this_process(config.node_id.as_str());
        // `wrap` wraps the first chain's client (the only one of a `[chain]`
        // configuration); every client is counted, as the daemon does.
        let wrap = std::sync::Mutex::new(Some(wrap));
        let wrapping: WrapClient<'_> = &|name, client| {
            let client = match wrap.lock().expect("wrap lock").take() {
                Some(wrap) => wrap(client),
                None => client,
            };
            txmgr::daemon::CountingChain::wrap(name, client)
        };
        let chains = start_chains(&config, &owner, &pool, wrapping)
            .await
            .expect("chains start");
        let engine = chains[0].engine.clone();
        let webhooks = txmgr::daemon::start_chain_webhooks(&config, &owner, pool.clone(), &chains)
            .await
            .expect("webhooks start");
        let host = Arc::new(ChainHost::new(
            owner.clone(),
            pool.clone(),
            txmgr::daemon::CountingChain::wrap,
            chains.clone(),
            webhooks.key_chain(),
        ));
        let listener = tokio::spawn(listen_for_served(pool.clone(), host.served()));
        let completions = CompletionNotifier::listen(pool.clone(), config.http.max_long_polls);
        let wakes = txmgr::daemon::wake_on_completions(&completions, webhooks.clone());
        let reloader = file.map(|path| -> Arc<dyn txmgr::http::Reload> {
            Arc::new(Reloader::new(
                path,
                host.clone(),
                webhooks.clone(),
                config.clone(),
            ))
        });
        let mut ops = ops_state(&config, &pool, &host.served(), reloader).await;
        // The router is called in-process or served on whatever port a test
        // binds, not on `http.listen`: a tokenless test node answers a
        // loopback `Host` with any port (a daemon, only with the port it
        // bound; tests/it/cross_site.rs checks that on real daemons).
        ops.local_hosts = txmgr::http::LocalHosts::new(None);
        let app = app(AppState {
            completions,
            pool: pool.clone(),
            chains: host.served(),
            limits: Limits::from_config(&config.http),
            ops: Arc::new(ops),
        });
        TestNode {
            engine,
            chains,
            host,
            app,
            listener,
            webhooks,
            wakes,
        }
    }

    /// Sends a request to the router; returns status and JSON body.
    pub(crate) async fn request(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        self.request_as(None, method, path, body).await
    }

    /// `GET path` on the completion feed until `served` holds for the page
    /// (30 s at most), then that page. A committed row is served only once
    /// every older transaction on the server has ended (README "Completion
    /// feed"), which in a full run includes other tests' transactions.
    pub(crate) async fn feed_when(&self, path: &str, served: impl Fn(&Value) -> bool) -> Value {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let (status, page) = self.request("GET", path, None).await;
            assert_eq!(status, 200, "{page}");
            if served(&page) {
                return page;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the feed did not serve what was expected within 30 s: {page}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }

    /// Like [`TestNode::request`], with `Authorization: Bearer <token>`.
    pub(crate) async fn request_as(
        &self,
        token: Option<&str>,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let mut builder = Request::builder().method(method).uri(path);
        if let Some(token) = token {
            builder = builder.header("authorization", format!("Bearer {token}"));
        }
        // Every POST says JSON, an empty body included, as the API requires
        // (a page cannot send that cross-site).
        if body.is_some() || method == "POST" {
            builder = builder.header("content-type", "application/json");
        }
        let body = body.map_or_else(Body::empty, |json| Body::from(json.to_string()));
        let (status, bytes) = self.send(builder.body(body).expect("request")).await;
        let json = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        (status, json)
    }

    /// GETs `path` from the router (no token); returns status and text body.
    pub(crate) async fn text(&self, path: &str) -> (u16, String) {
        let request = Request::builder()
            .uri(path)
            .body(Body::empty())
            .expect("request");
        let (status, bytes) = self.send(request).await;
        (status, String::from_utf8_lossy(&bytes).into_owned())
    }

    async fn send(&self, request: Request<Body>) -> (u16, axum::body::Bytes) {
        let response = self
            .app
            .clone()
            .oneshot(request)
            .await
            .expect("router answers");
        let status = response.status().as_u16();
        let bytes = to_bytes(response.into_body(), usize::MAX)
            .await
            .expect("body");
        (status, bytes)
    }

    /// Crashes the node: actors die mid-work, leases are not released.
    pub(crate) fn kill(self) {
        self.listener.abort();
        self.wakes.abort();
        self.webhooks.kill();
        for chain in &self.chains {
            chain.engine.kill();
        }
        for chain in self.host.running() {
            chain.engine.kill();
        }
    }

    /// Stops the engine gracefully (leases released).
    pub(crate) async fn stop(self) {
        self.listener.abort();
        self.wakes.abort();
        self.webhooks
            .shutdown(std::time::Duration::from_secs(10))
            .await;
        self.host.stop_all(std::time::Duration::from_secs(10)).await;
    }
}
