//! Wiring of one node: database, chain check, membership, HTTP, shutdown.
//!
//! Shutdown flows top-down from one signal: HTTP stops accepting, the engine
//! drains and releases its leases, then the node deregisters.

mod audit_retention;
mod chain;
mod chains;
mod counting_chain;
mod db_stats;
mod engine;
mod history_retention;
pub mod https;
mod ledger_retention;
mod observe;
mod pending_handshakes;
mod registration;
mod reload;
mod restart_keys;
pub mod schema;
mod telemetry;
mod webhooks;

use std::{path::PathBuf, sync::Arc, time::Duration};

use anyhow::Context;
use sqlx::{
    postgres::{PgConnectOptions, PgPoolOptions},
    PgPool,
};
use txmgr_actors::store;

use crate::{
    config::Config,
    http::{
        auth::Auth, AppState, CompletionNotifier, Limits, OpsState, Readiness, Reload, ServedChains,
    },
};

pub use audit_retention::audit_retention_loop;
pub use chain::{connect_chain, connect_named_chain, endpoint_settings};
pub use chains::{
    served_chains, start_chains, stop_chains, ChainHost, ChainRuntime, ConnectedChain, WrapAdded,
    WrapClient,
};
pub use counting_chain::CountingChain;
pub use db_stats::print_db_stats;
pub use engine::{
    listen_for_chains, listen_for_served, listen_for_work, start_chain_engine, start_engine,
    EngineSubmissions,
};
pub use observe::{feed_retention_loop, gauge_loop, metrics_recorder};
use registration::NodeRegistration;
pub use reload::Reloader;
pub use restart_keys::needs_restart;
pub use webhooks::{start_chain_webhooks, wake_on_completions};

/// Period of the feed and spend ledger retention rounds.
const FEED_RETENTION_INTERVAL: Duration = Duration::from_secs(60);

/// Period of the gauges refreshed from the database and the engine.
const GAUGE_INTERVAL: Duration = Duration::from_secs(5);

/// The operator surface of a node: tokens, metrics, readiness of the
/// database and every chain (checked once here, then in the background),
/// reload.
pub async fn ops_state(
    config: &Config,
    pool: &PgPool,
    chains: &ServedChains,
    reloader: Option<Arc<dyn Reload>>,
) -> OpsState {
    OpsState {
        auth: Arc::new(Auth::from_config(&config.auth)),
        metrics: metrics_recorder(),
        metrics_public: config.metrics_public(),
        readiness: Some(
            Readiness::start(pool.clone(), chains.clone(), config.http.readiness_interval).await,
        ),
        reloader,
        heartbeat_interval: config.node.heartbeat_interval,
        history: crate::http::history::NodeHistory::start(
            pool.clone(),
            chains.clone(),
            counting_chain::rpc_errors_total,
        ),
        local_hosts: crate::http::LocalHosts::new(Some(config.http.listen)),
        history_retain: config.history.effective_retain(&config.feed),
    }
}
pub use telemetry::{init_tracing, TracingGuard, OTEL_TARGET};

/// Connects to PostgreSQL with the configured pool limits. TLS follows the
/// URL's `sslmode` (`disable`, `prefer` — the default —, `require`,
/// `verify-ca`, `verify-full`) and `sslrootcert` parameters.
///
/// Every session is bounded, so no node — frozen, partitioned or slow — can
/// hold a lock for long:
/// - `idle_in_transaction_session_timeout` = the lease duration: a node
///   frozen inside a fenced transaction holds the lease row `FOR SHARE`,
///   which would block every take-over (and hold back the completion feed);
///   the server ends such a session once it has idled that long;
/// - `statement_timeout` and `lock_timeout` from `[database]`: a stuck
///   statement is cancelled, and a wait behind someone else's lock gives up
///   and is retried by the caller;
/// - server-side TCP keep-alives (`tcp_keepalives_*` from
///   `database.keepalive_idle`): a node cut off by a partition loses its
///   session, its transaction and its locks without waiting for the OS
///   default of hours.
pub async fn connect(config: &Config) -> anyhow::Result<PgPool> {
    txmgr_actors::tls::install_default_provider();
    let shown = config.database.redacted_url();
    let options: PgConnectOptions = config
        .database
        .url
        .parse()
        .map_err(|e| anyhow::anyhow!("database.url: {e}"))?;
    let settings = session_settings(config);
    let options = options.options(settings.iter().map(|(k, v)| (*k, v.as_str())));
    PgPoolOptions::new()
        .max_connections(config.database.max_connections)
        .acquire_timeout(config.database.connect_timeout)
        .connect_with(options)
        .await
        .with_context(|| format!("connecting to {shown}"))
}

/// The bounds set on every pooled session (see [`connect`]).
pub fn session_settings(config: &Config) -> Vec<(&'static str, String)> {
    let ms = |d: std::time::Duration| d.as_millis().max(1).to_string();
    let db = &config.database;
    let idle_secs = db.keepalive_idle.as_secs().max(1);
    vec![
        (
            "idle_in_transaction_session_timeout",
            config.lease.duration.as_millis().max(1000).to_string(),
        ),
        ("statement_timeout", ms(db.statement_timeout)),
        ("lock_timeout", ms(db.lock_timeout)),
        ("tcp_keepalives_idle", idle_secs.to_string()),
        (
            "tcp_keepalives_interval",
            (idle_secs / 3).max(1).to_string(),
        ),
        ("tcp_keepalives_count", "3".to_string()),
    ]
}

/// `txmgr migrate`: applies the migrations and exits.
pub async fn migrate_only(config: &Config) -> anyhow::Result<()> {
    let pool = connect(config).await?;
    store::migrate(&pool).await.context("applying migrations")?;
    let state = schema::check_at_start(&pool).await?;
    tracing::info!(
        database_schema = state.database,
        build_schema = state.build,
        "migrations applied"
    );
    Ok(())
}

/// `txmgr migrate --plan`: prints the pending migrations and what each does
/// to nodes of the previous release; changes nothing.
pub async fn migration_plan(config: &Config) -> anyhow::Result<()> {
    let pool = connect(config).await?;
    print!("{}", schema::plan(&pool).await?);
    Ok(())
}

/// `txmgr run`: serves until SIGINT/SIGTERM.
pub async fn run(config: Config, config_path: PathBuf, migrate: bool) -> anyhow::Result<()> {
    let recorder = metrics_recorder();
    // From here on SIGINT/SIGTERM mean a graceful stop, even during start-up.
    let shutdown = shutdown_signal();
    // Built before anything is contacted, so a bad certificate or key stops
    // the node at once, whatever the state of the database and the chain.
    let https = config
        .http
        .tls
        .as_ref()
        .map(|tls| {
            Ok::<_, anyhow::Error>((
                https::server_config(tls)?,
                https::HandshakeLimits::from(tls),
            ))
        })
        .transpose()?;
    let pool = connect(&config).await?;
    if migrate && config.database.migrate_on_start {
        store::migrate(&pool).await.context("applying migrations")?;
    }
    schema::check_at_start(&pool).await?;
    let listener = tokio::net::TcpListener::bind(config.http.listen)
        .await
        .with_context(|| format!("http.listen: cannot bind {}", config.http.listen))?;
    let bound = listener.local_addr().context("http.listen")?;
    let http_addr = bound.to_string();
    let mut registration = NodeRegistration::claim(&pool, &config, &http_addr).await?;
    let owner = registration.owner().clone();
    // Before any chain starts: from now on no node prunes a ledger row this
    // node's windows count.
    if let Err(err) = ledger_retention::register(&pool, &config).await {
        if let Err(cleanup) = registration.leave().await {
            tracing::warn!(error = %cleanup, "removing the node row failed");
        }
        return Err(anyhow::Error::new(err).context("registering the spend ledger horizon"));
    }
    let counting: WrapClient<'_> = &|name, client| CountingChain::wrap(name, client);
    let chains = match start_chains(&config, &owner, &pool, counting).await {
        Ok(chains) => chains,
        Err(err) => {
            // Free the node id for the next attempt at once.
            if let Err(cleanup) = registration.leave().await {
                tracing::warn!(error = %cleanup, "removing the node row failed");
            }
            return Err(err);
        }
    };
    let webhooks = match start_chain_webhooks(&config, &owner, pool.clone(), &chains).await {
        Ok(webhooks) => webhooks,
        Err(err) => {
            stop_chains(&chains, config.lease.duration).await;
            if let Err(cleanup) = registration.leave().await {
                tracing::warn!(error = %cleanup, "removing the node row failed");
            }
            return Err(err);
        }
    };
    let node_id = config.node_id.clone();
    let served: Vec<String> = chains
        .iter()
        .map(|c| format!("{} ({})", c.name, c.chain_id))
        .collect();
    tracing::info!(node_id, instance = %owner.instance, http = %http_addr, https = https.is_some(), chains = ?served, "txmgr node started");
    // Stop on a signal, or when another process took the node id over.
    let superseded = registration.superseded();
    let shutdown = async move {
        tokio::select! {
            () = shutdown => {}
            () = superseded => {}
        }
    };
    // From here on the running chains belong to the host: a reload may add
    // or remove one, and every view below follows.
    let host = Arc::new(ChainHost::new(
        owner.clone(),
        pool.clone(),
        CountingChain::wrap,
        chains,
        webhooks.key_chain(),
    ));
    let work_listener = tokio::spawn(listen_for_served(pool.clone(), host.served()));
    let gauges = tokio::spawn(gauge_loop(
        pool.clone(),
        host.served(),
        Some(webhooks.clone()),
        recorder,
        (GAUGE_INTERVAL, config.node.liveness()),
    ));
    // Feed retention: `0s` keeps every row.
    let retention = (!config.feed.retain.is_zero()).then(|| {
        tokio::spawn(feed_retention_loop(
            pool.clone(),
            config.feed.retain,
            FEED_RETENTION_INTERVAL,
        ))
    });
    // The spend ledger's own retention, whatever `feed.retain` is.
    let ledger_retention = tokio::spawn(ledger_retention::ledger_retention_loop(
        pool.clone(),
        FEED_RETENTION_INTERVAL,
    ));
    // Audit retention, beside the feed's: `0s` keeps every row.
    let audit_retention = (!config.feed.audit_retain.is_zero()).then(|| {
        tokio::spawn(audit_retention_loop(
            pool.clone(),
            config.feed.audit_retain,
            FEED_RETENTION_INTERVAL,
        ))
    });
    // History retention (`0s` keeps every intent: the loop then only
    // refreshes the table gauges).
    let history_retention = tokio::spawn(history_retention::history_retention_loop(
        pool.clone(),
        history_retention::HistoryRetention {
            node_id: config.node_id.clone(),
            retain: config.history.effective_retain(&config.feed),
            audit_retain: config.feed.audit_retain,
            pace: store::history_retention::Pace {
                every: config.history.interval,
                delete_rate: config.history.delete_rate,
            },
        },
    ));
    let completions = CompletionNotifier::listen(pool.clone(), config.http.max_long_polls);
    let webhook_wakes = wake_on_completions(&completions, webhooks.clone());
    let limits = Limits::from_config(&config.http);
    let lease_duration = config.lease.duration;
    let mut ops = ops_state(&config, &pool, &host.served(), None).await;
    // The reloader keeps the running configuration; it is moved there, not
    // copied (with 10,000 submitters a copy is ~8 MB held for nothing).
    let reloader: Arc<dyn Reload> = Arc::new(Reloader::new(
        config_path,
        host.clone(),
        webhooks.clone(),
        config,
    ));
    ops.reloader = Some(reloader.clone());
    // The port actually bound (`http.listen` may ask for any free one).
    ops.local_hosts = crate::http::LocalHosts::new(Some(bound));
    let hangups = tokio::spawn(reload_on_sighup(reloader));
    let state = AppState {
        pool: pool.clone(),
        chains: host.served(),
        limits,
        completions,
        ops: Arc::new(ops),
    };
    let app = crate::http::app(state);
    match https {
        Some((tls, limits)) => {
            let listener = https::TlsListener::new(listener, tls, limits).context("http.tls")?;
            axum::serve(listener, app)
                .with_graceful_shutdown(shutdown)
                .await
        }
        None => {
            axum::serve(listener, app)
                .with_graceful_shutdown(shutdown)
                .await
        }
    }
    .context("http server")?;

    tracing::info!(node_id, "shutting down: draining submitters");
    work_listener.abort();
    hangups.abort();
    gauges.abort();
    for retention in [retention, audit_retention].into_iter().flatten() {
        retention.abort();
    }
    ledger_retention.abort();
    history_retention.abort();
    webhook_wakes.abort();
    webhooks.shutdown(lease_duration).await;
    host.stop_all(lease_duration).await;
    let left = registration.leave().await;
    pool.close().await;
    left
}

/// Re-reads the configuration on every SIGHUP (same as `POST /v1/ops/reload`).
async fn reload_on_sighup(reloader: Arc<dyn Reload>) {
    #[cfg(unix)]
    {
        let mut hangup = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        {
            Ok(signal) => signal,
            Err(err) => {
                tracing::error!(error = %err, "cannot listen for SIGHUP");
                return;
            }
        };
        while hangup.recv().await.is_some() {
            match reloader.reload().await {
                Ok(report) => {
                    tracing::info!(target: "txmgr::audit", who = "SIGHUP", action = "reload", ?report, "operator action")
                }
                Err(err) => {
                    tracing::warn!(target: "txmgr::reload", error = %err, "SIGHUP: configuration rejected; running configuration kept")
                }
            }
        }
    }
    #[cfg(not(unix))]
    let _ = reloader;
}

/// Resolves on SIGINT or SIGTERM. The handlers are installed when this is
/// called, not when the future is first polled, so a signal that arrives
/// while the node is still starting is not lost (nor fatal).
pub fn shutdown_signal() -> impl std::future::Future<Output = ()> + Send {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let interrupt = signal(SignalKind::interrupt());
        let terminate = signal(SignalKind::terminate());
        async move {
            match (interrupt, terminate) {
                (Ok(mut interrupt), Ok(mut terminate)) => {
                    tokio::select! {
                        _ = interrupt.recv() => {},
                        _ = terminate.recv() => {},
                    }
                }
                (interrupt, terminate) => {
                    for err in [interrupt.err(), terminate.err()].into_iter().flatten() {
                        tracing::error!(error = %err, "cannot listen for shutdown signals");
                    }
                    std::future::pending::<()>().await;
                }
            }
        }
    }
    #[cfg(not(unix))]
    async {
        if let Err(err) = tokio::signal::ctrl_c().await {
            tracing::error!(error = %err, "cannot listen for ctrl-c");
            std::future::pending::<()>().await;
        }
    }
}
