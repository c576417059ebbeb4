//! TLS for tests: a throw-away certificate authority made with rcgen, server
//! and client certificates it issues (written as PEM files), and a
//! TLS-terminating TCP proxy that puts `https://` and `wss://` in front of a
//! plain upstream such as anvil.

use std::{
    path::{Path, PathBuf},
    sync::Arc,
};

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use rustls::ServerConfig;
use rustls_pki_types::{pem::PemObject, CertificateDer, PrivateKeyDer};
use tokio::{
    io::copy_bidirectional,
    net::{TcpListener, TcpStream},
    task::{JoinHandle, JoinSet},
};
use tokio_rustls::TlsAcceptor;

/// A certificate authority living in a temporary directory.
pub(crate) struct TestCa {
    issuer: Issuer<'static, KeyPair>,
    dir: PathBuf,
    /// The CA certificate (PEM) — what a client trusts.
    pub(crate) ca_file: PathBuf,
}

/// A certificate and its key, as PEM files.
#[derive(Debug, Clone)]
pub(crate) struct Issued {
    /// Certificate chain (leaf only).
    pub(crate) cert_file: PathBuf,
    /// Private key (PKCS#8).
    pub(crate) key_file: PathBuf,
}

impl TestCa {
    /// A new CA named `name`, files under a fresh temporary directory.
    pub(crate) fn new(name: &str) -> TestCa {
        let dir =
            std::env::temp_dir().join(format!("txmgr-ca-{name}-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).expect("CA directory");
        let key = KeyPair::generate().expect("CA key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let certificate = params.self_signed(&key).expect("self-signed CA");
        let ca_file = dir.join("ca.pem");
        std::fs::write(&ca_file, certificate.pem()).expect("write CA");
        let issuer = Issuer::new(params, key);
        TestCa {
            issuer,
            dir,
            ca_file,
        }
    }

    /// A server certificate for `localhost` and `127.0.0.1`.
    pub(crate) fn server(&self, stem: &str) -> Issued {
        self.issue(stem, &["localhost", "127.0.0.1"])
    }

    /// A certificate for `names` (DNS names or IP addresses) as `stem.pem`
    /// and `stem.key` (also usable as a client certificate).
    pub(crate) fn issue(&self, stem: &str, names: &[&str]) -> Issued {
        let key = KeyPair::generate().expect("leaf key");
        let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        let mut params = CertificateParams::new(names).expect("leaf params");
        params
            .distinguished_name
            .push(DnType::CommonName, stem.to_owned());
        let certificate = params.signed_by(&key, &self.issuer).expect("signed leaf");
        let cert_file = self.dir.join(format!("{stem}.pem"));
        let key_file = self.dir.join(format!("{stem}.key"));
        std::fs::write(&cert_file, certificate.pem()).expect("write cert");
        std::fs::write(&key_file, key.serialize_pem()).expect("write key");
        Issued {
            cert_file,
            key_file,
        }
    }

    /// The directory holding the files.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for TestCa {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A rustls server configuration from PEM files.
pub(crate) fn server_config(issued: &Issued) -> Arc<ServerConfig> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&issued.cert_file)
        .expect("cert file")
        .collect::<Result<_, _>>()
        .expect("cert pem");
    let key = PrivateKeyDer::from_pem_file(&issued.key_file).expect("key pem");
    let config = ServerConfig::builder_with_provider(txmgr_actors::tls::provider())
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .expect("server config");
    Arc::new(config)
}

/// A rustls client configuration trusting `ca_file`, optionally presenting
/// a client certificate.
pub(crate) fn client_config(ca_file: &Path, identity: Option<&Issued>) -> rustls::ClientConfig {
    let mut roots = rustls::RootCertStore::empty();
    for certificate in CertificateDer::pem_file_iter(ca_file).expect("ca file") {
        roots.add(certificate.expect("ca pem")).expect("ca cert");
    }
    let builder = rustls::ClientConfig::builder_with_provider(txmgr_actors::tls::provider())
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_root_certificates(roots);
    match identity {
        Some(issued) => {
            let chain: Vec<CertificateDer<'static>> =
                CertificateDer::pem_file_iter(&issued.cert_file)
                    .expect("cert file")
                    .collect::<Result<_, _>>()
                    .expect("cert pem");
            let key = PrivateKeyDer::from_pem_file(&issued.key_file).expect("key pem");
            builder
                .with_client_auth_cert(chain, key)
                .expect("client identity")
        }
        None => builder.with_no_client_auth(),
    }
}

/// A reqwest client for `https://` test calls trusting `ca_file`.
pub(crate) fn https_client(ca_file: &Path, identity: Option<&Issued>) -> reqwest::Client {
    reqwest::Client::builder()
        .tls_backend_preconfigured(client_config(ca_file, identity))
        .timeout(std::time::Duration::from_secs(10))
        .build()
        .expect("https client")
}

/// Terminates TLS on a loopback port and relays the bytes to a plain TCP
/// upstream: HTTP and WebSocket upgrades pass through unchanged. Stops
/// (with every connection) when dropped.
pub(crate) struct TlsProxy {
    port: u16,
    server: JoinHandle<()>,
}

impl TlsProxy {
    /// Starts a proxy presenting `issued` in front of `upstream`
    /// (`host:port`).
    pub(crate) async fn start(issued: &Issued, upstream: &str) -> TlsProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("local addr").port();
        let acceptor = TlsAcceptor::from(server_config(issued));
        let upstream = upstream.to_owned();
        let server = tokio::spawn(async move {
            let mut connections = JoinSet::new();
            loop {
                tokio::select! {
                    accepted = listener.accept() => {
                        let Ok((stream, _)) = accepted else { continue };
                        let acceptor = acceptor.clone();
                        let upstream = upstream.clone();
                        connections.spawn(async move {
                            let Ok(mut tls) = acceptor.accept(stream).await else { return };
                            let Ok(mut plain) = TcpStream::connect(&upstream).await else { return };
                            let _ = copy_bidirectional(&mut tls, &mut plain).await;
                        });
                    }
                    Some(_) = connections.join_next(), if !connections.is_empty() => {}
                }
            }
        });
        TlsProxy { port, server }
    }

    /// `https://localhost:<port>` (the certificate names localhost).
    pub(crate) fn https_url(&self) -> String {
        format!("https://localhost:{}", self.port)
    }

    /// `wss://localhost:<port>`.
    pub(crate) fn wss_url(&self) -> String {
        format!("wss://localhost:{}", self.port)
    }
}

impl Drop for TlsProxy {
    fn drop(&mut self) {
        self.server.abort();
    }
}
