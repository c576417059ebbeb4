//! `--rpc-tls`: a TLS terminator in front of anvil with a CA made for the
//! run, so the engine's JSON-RPC goes over `https://` exactly as it would to
//! a hosted provider (rustls, certificate verified against `chain.ca_file`).

use std::{path::PathBuf, sync::Arc};

use anyhow::Context;
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use rustls_pki_types::{pem::PemObject, CertificateDer, PrivateKeyDer};
use tokio::{
    io::copy_bidirectional,
    net::{TcpListener, TcpStream},
    task::JoinHandle,
};
use tokio_rustls::TlsAcceptor;

/// A running terminator; stops when dropped.
pub(crate) struct TlsTerminator {
    /// `https://localhost:<port>`.
    pub(crate) url: String,
    /// The CA certificate to trust (PEM file).
    pub(crate) ca_file: PathBuf,
    server: JoinHandle<()>,
}

impl TlsTerminator {
    /// Terminates TLS on a loopback port and relays to `upstream` (`host:port`).
    pub(crate) async fn start(upstream: &str) -> anyhow::Result<TlsTerminator> {
        let ca_key = KeyPair::generate().context("CA key")?;
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).context("CA params")?;
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = ca_params.self_signed(&ca_key).context("CA certificate")?;
        let issuer = Issuer::new(ca_params, ca_key);
        let leaf_key = KeyPair::generate().context("server key")?;
        let leaf = CertificateParams::new(vec!["localhost".to_owned()])
            .context("server params")?
            .signed_by(&leaf_key, &issuer)
            .context("server certificate")?;
        let ca_file =
            std::env::temp_dir().join(format!("txmgr-bench-ca-{}.pem", std::process::id()));
        std::fs::write(&ca_file, ca.pem()).context("writing the CA file")?;

        let chain =
            vec![CertificateDer::from_pem_slice(leaf.pem().as_bytes()).context("leaf pem")?];
        let key = PrivateKeyDer::from_pem_slice(leaf_key.serialize_pem().as_bytes())
            .context("key pem")?;
        let config = rustls::ServerConfig::builder_with_provider(txmgr_actors::tls::provider())
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(chain, key)?;
        let acceptor = TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind("127.0.0.1:0").await.context("bind")?;
        let port = listener.local_addr().context("local addr")?.port();
        let upstream = upstream.to_owned();
        let server = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let _ = stream.set_nodelay(true);
                let acceptor = acceptor.clone();
                let upstream = upstream.clone();
                tokio::spawn(async move {
                    let Ok(mut tls) = acceptor.accept(stream).await else {
                        return;
                    };
                    let Ok(mut plain) = TcpStream::connect(&upstream).await else {
                        return;
                    };
                    let _ = plain.set_nodelay(true);
                    let _ = copy_bidirectional(&mut tls, &mut plain).await;
                });
            }
        });
        Ok(TlsTerminator {
            url: format!("https://localhost:{port}"),
            ca_file,
            server,
        })
    }
}

impl Drop for TlsTerminator {
    fn drop(&mut self) {
        self.server.abort();
        let _ = std::fs::remove_file(&self.ca_file);
    }
}
