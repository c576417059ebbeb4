//! HTTPS for the API (`[http.tls]`), optionally with client certificates.
//!
//! TLS handshakes run in their own tasks, bounded in number and time, and
//! only finished connections reach axum. The accept loop never waits and
//! never turns a newcomer away: a connection that has not finished its
//! handshake within `http.tls.handshake_timeout` is closed, and when
//! `http.tls.max_pending_handshakes` (or an address's optional
//! `max_handshakes_per_peer`) are pending, the oldest pending one is closed
//! to make room ([`PendingHandshakes`]). So idle sockets — from any address,
//! including the one a NAT or load balancer gives every client — keep
//! nobody out of the API (`/healthz` included).

use std::{net::SocketAddr, sync::Arc, time::Duration};

use anyhow::Context;
use rustls::{server::WebPkiClientVerifier, ServerConfig};
use rustls_pki_types::{pem::PemObject, CertificateDer, PrivateKeyDer};
use tokio::{
    net::{TcpListener, TcpStream},
    sync::mpsc,
    task::JoinHandle,
};
use tokio_rustls::{server::TlsStream, TlsAcceptor};

use super::pending_handshakes::{PendingHandshakes, Shed};
use crate::config::HttpTlsConfig;

/// The server configuration of `[http.tls]`: certificate chain, key, and
/// with `client_ca_file` a verifier that requires client certificates.
pub fn server_config(tls: &HttpTlsConfig) -> anyhow::Result<Arc<ServerConfig>> {
    txmgr_actors::tls::install_default_provider();
    let chain: Vec<CertificateDer<'static>> =
        txmgr_actors::tls::read_certificates(&tls.cert_file).context("http.tls.cert_file")?;
    let key = PrivateKeyDer::from_pem_file(&tls.key_file).map_err(|e| {
        anyhow::anyhow!(
            "http.tls.key_file: {}: no usable PEM private key: {e}",
            tls.key_file.display()
        )
    })?;
    let builder = ServerConfig::builder_with_provider(txmgr_actors::tls::provider())
        .with_safe_default_protocol_versions()
        .context("http.tls")?;
    let builder = match &tls.client_ca_file {
        Some(path) => {
            let mut roots = rustls::RootCertStore::empty();
            for certificate in
                txmgr_actors::tls::read_certificates(path).context("http.tls.client_ca_file")?
            {
                roots
                    .add(certificate)
                    .context("http.tls.client_ca_file: not a usable CA certificate")?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(
                Arc::new(roots),
                txmgr_actors::tls::provider(),
            )
            .build()
            .context("http.tls.client_ca_file")?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let mut config = builder
        .with_single_cert(chain, key)
        .context("http.tls: the certificate does not match the key")?;
    // The server speaks HTTP/1.1 only.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The bounds on handshakes in progress, from `[http.tls]`.
#[derive(Debug, Clone, Copy)]
pub struct HandshakeLimits {
    /// A handshake not finished by then is closed.
    pub timeout: Duration,
    /// Pending at once on the node; beyond it the oldest is closed.
    pub max_pending: usize,
    /// Pending at once from one address, when capped.
    pub max_per_peer: Option<usize>,
}

impl From<&HttpTlsConfig> for HandshakeLimits {
    fn from(tls: &HttpTlsConfig) -> Self {
        Self {
            timeout: tls.handshake_timeout,
            max_pending: tls.max_pending_handshakes,
            max_per_peer: tls.max_handshakes_per_peer,
        }
    }
}

/// A listener that hands axum TLS connections whose handshake is done.
pub struct TlsListener {
    incoming: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
    acceptor: JoinHandle<()>,
}

impl TlsListener {
    /// Starts accepting on `listener` with `config`, handshakes bounded by
    /// `limits`.
    pub fn new(
        listener: TcpListener,
        config: Arc<ServerConfig>,
        limits: HandshakeLimits,
    ) -> std::io::Result<Self> {
        let local = listener.local_addr()?;
        let (tx, incoming) = mpsc::channel(64);
        let acceptor = tokio::spawn(accept_loop(listener, TlsAcceptor::from(config), tx, limits));
        Ok(Self {
            incoming,
            local,
            acceptor,
        })
    }
}

impl Drop for TlsListener {
    fn drop(&mut self) {
        self.acceptor.abort();
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.incoming.recv().await {
            Some(connection) => connection,
            // The accept loop only ends when this listener is dropped.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.local)
    }
}

async fn accept_loop(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    ready: mpsc::Sender<(TlsStream<TcpStream>, SocketAddr)>,
    limits: HandshakeLimits,
) {
    let pending = PendingHandshakes::new(limits.max_pending, limits.max_per_peer);
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(err) => {
                // Out of file descriptors and the like: back off, keep serving.
                tracing::warn!(target: "http", error = %err, "accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        // Never waits: room is made by closing the oldest pending handshake.
        let mut slot = pending.admit(peer.ip());
        let acceptor = acceptor.clone();
        let ready = ready.clone();
        tokio::spawn(async move {
            // The slot is held until axum has the connection, so connections
            // waiting for it count too (and can be shed).
            let handshake = async {
                match tokio::time::timeout(limits.timeout, acceptor.accept(stream)).await {
                    Ok(Ok(tls)) => {
                        let _ = ready.send((tls, peer)).await;
                    }
                    Ok(Err(err)) => {
                        tracing::debug!(target: "http", %peer, error = %err, "TLS handshake failed")
                    }
                    Err(_) => {
                        metrics::counter!(txmgr_actors::metrics::TLS_REFUSED, "reason" => "timeout")
                            .increment(1);
                        tracing::debug!(target: "http", %peer, "TLS handshake timed out; closed");
                    }
                }
            };
            tokio::select! {
                () = handshake => {}
                shed = &mut slot.shed => {
                    // A dropped sender without a reason cannot happen while
                    // this task holds the slot; count it as busy anyway.
                    let why = shed.unwrap_or(Shed::Busy);
                    metrics::counter!(txmgr_actors::metrics::TLS_REFUSED, "reason" => why.label())
                        .increment(1);
                    tracing::debug!(target: "http", %peer, reason = why.label(),
                        "oldest pending TLS handshake closed to make room");
                }
            }
        });
    }
}
