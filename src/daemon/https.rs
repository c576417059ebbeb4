//! HTTPS for the API (`[http.tls]`), optionally with client certificates.
//!
//! TLS handshakes run in their own tasks, bounded in number and time, and
//! only finished connections reach axum: a client that stalls its handshake
//! holds one permit for at most [`HANDSHAKE_TIMEOUT`], never the accept loop.

use std::{net::SocketAddr, sync::Arc, time::Duration};

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
    /// Starts accepting on `listener` with `config`.
    pub fn new(listener: TcpListener, config: Arc<ServerConfig>) -> std::io::Result<Self> {
        let local = listener.local_addr()?;
        let (tx, incoming) = mpsc::channel(64);
        let acceptor = tokio::spawn(accept_loop(listener, TlsAcceptor::from(config), tx));
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
        let Ok(permit) = permits.clone().acquire_owned().await else {
            return;
        };
        let acceptor = acceptor.clone();
        let ready = ready.clone();
        tokio::spawn(async move {
            let _permit = permit;
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
