//! HTTPS for the API (`[http.tls]`), optionally with client certificates.
//!
//! TLS handshakes run in their own tasks, bounded in number and time, and
//! only finished connections reach axum: a client that stalls its handshake
//! holds one permit for at most [`HANDSHAKE_TIMEOUT`], never the accept loop.
//! The accept loop never waits: a connection that finds no free handshake
//! permit, or whose peer address already holds
//! `http.tls.max_handshakes_per_peer` (16), is closed at once, so idle sockets from one address cannot keep the API
//! (`/healthz` included) from other clients.

use std::{
    collections::HashMap,
    net::{IpAddr, SocketAddr},
    sync::{Arc, Mutex},
    time::Duration,
};

use anyhow::Context;
use rustls::{server::WebPkiClientVerifier, ServerConfig};
use rustls_pki_types::{pem::PemObject, CertificateDer, PrivateKeyDer};
use tokio::{
    net::{TcpListener, TcpStream},
    sync::{mpsc, Semaphore},
    task::JoinHandle,
};
use tokio_rustls::{server::TlsStream, TlsAcceptor};

use crate::config::HttpTlsConfig;

/// Longest a client may take to finish its TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Handshakes in progress at once, at most.
const MAX_HANDSHAKES: usize = 256;

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

/// A listener that hands axum TLS connections whose handshake is done.
pub struct TlsListener {
    incoming: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
    acceptor: JoinHandle<()>,
}

impl TlsListener {
    /// Starts accepting on `listener` with `config`, at most `per_peer`
    /// handshakes at once from one address.
    pub fn new(
        listener: TcpListener,
        config: Arc<ServerConfig>,
        per_peer: usize,
    ) -> std::io::Result<Self> {
        let local = listener.local_addr()?;
        let (tx, incoming) = mpsc::channel(64);
        let peers = Arc::new(PeerHandshakes {
            counts: Mutex::default(),
            max: per_peer.max(1),
        });
        let acceptor = tokio::spawn(accept_loop(listener, TlsAcceptor::from(config), tx, peers));
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

/// Handshakes in progress per peer address, at most `max` each.
#[derive(Debug)]
struct PeerHandshakes {
    counts: Mutex<HashMap<IpAddr, usize>>,
    max: usize,
}

/// One handshake counted against its peer; uncounted when dropped.
struct PeerSlot {
    peers: Arc<PeerHandshakes>,
    ip: IpAddr,
}

impl PeerHandshakes {
    /// A slot for `ip`, unless it holds `max` already.
    fn take(self: &Arc<Self>, ip: IpAddr) -> Option<PeerSlot> {
        // A poisoned lock only means a panic elsewhere mid-update of a
        // counter: the map is still usable.
        let mut peers = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        let count = peers.entry(ip).or_default();
        if *count >= self.max {
            return None;
        }
        *count += 1;
        Some(PeerSlot {
            peers: self.clone(),
            ip,
        })
    }
}

impl Drop for PeerSlot {
    fn drop(&mut self) {
        let mut peers = self.peers.counts.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(count) = peers.get_mut(&self.ip) {
            *count -= 1;
            if *count == 0 {
                peers.remove(&self.ip);
            }
        }
    }
}

async fn accept_loop(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    ready: mpsc::Sender<(TlsStream<TcpStream>, SocketAddr)>,
    peers: Arc<PeerHandshakes>,
) {
    let permits = Arc::new(Semaphore::new(MAX_HANDSHAKES));
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
        // Never wait here: a full house closes the new connection (dropped
        // with `stream`) and the loop goes on accepting.
        let Some(slot) = peers.take(peer.ip()) else {
            metrics::counter!(txmgr_actors::metrics::TLS_REFUSED, "reason" => "per_peer")
                .increment(1);
            tracing::debug!(target: "http", %peer, "too many TLS handshakes from this address; closed");
            continue;
        };
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            metrics::counter!(txmgr_actors::metrics::TLS_REFUSED, "reason" => "busy").increment(1);
            tracing::debug!(target: "http", %peer, "no TLS handshake permit free; closed");
            continue;
        };
        let acceptor = acceptor.clone();
        let ready = ready.clone();
        tokio::spawn(async move {
            let _held = (permit, slot);
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                Ok(Ok(tls)) => {
                    let _ = ready.send((tls, peer)).await;
                }
                Ok(Err(err)) => {
                    tracing::debug!(target: "http", %peer, error = %err, "TLS handshake failed")
                }
                Err(_) => tracing::debug!(target: "http", %peer, "TLS handshake timed out"),
            }
        });
    }
}
