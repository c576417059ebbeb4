//! TLS for every client connection the engine opens: JSON-RPC over
//! `https://`, `newHeads` over `wss://`, the remote signer over `https://`.
//!
//! One policy everywhere: rustls with the aws-lc-rs provider (the only
//! provider in the tree), TLS 1.2 and 1.3, and as trust anchors Mozilla's
//! root list compiled into the binary (`webpki-roots`) plus, when configured,
//! the certificates of a private CA read from a PEM file. The operating
//! system's store is not consulted, so a node behaves the same in every
//! container image.

use std::{path::Path, sync::Arc};

use rustls::{crypto::CryptoProvider, ClientConfig, RootCertStore};
use rustls_pki_types::{pem::PemObject, CertificateDer};

/// Why a TLS configuration could not be built.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// The PEM file could not be read or holds no certificate.
    #[error("{path}: {reason}")]
    CaFile {
        /// The file, as configured.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// rustls refused the configuration.
    #[error("TLS configuration: {0}")]
    Rustls(#[from] rustls::Error),
}

/// The crypto provider of every TLS connection (client and server).
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

/// Makes aws-lc-rs the process-wide default provider, for libraries that
/// build their own rustls configuration without naming one (sqlx). Idempotent.
pub fn install_default_provider() {
    // Err means a provider is installed already, which is what we want.
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
}

/// Reads every certificate of a PEM file (a CA bundle may hold several).
pub fn read_certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let shown = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|e| TlsError::CaFile {
        path: shown.clone(),
        reason: format!("cannot read: {e}"),
    })?;
    let certificates = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::CaFile {
            path: shown.clone(),
            reason: format!("not a PEM certificate file: {e}"),
        })?;
    if certificates.is_empty() {
        return Err(TlsError::CaFile {
            path: shown,
            reason: "holds no PEM certificate".to_owned(),
        });
    }
    Ok(certificates)
}

/// Public roots plus the certificates of `ca_file`, if any.
pub fn root_store(ca_file: Option<&Path>) -> Result<RootCertStore, TlsError> {
    let mut roots = RootCertStore::from_iter(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    if let Some(path) = ca_file {
        for certificate in read_certificates(path)? {
            roots.add(certificate).map_err(|e| TlsError::CaFile {
                path: path.display().to_string(),
                reason: format!("not a usable CA certificate: {e}"),
            })?;
        }
    }
    Ok(roots)
}

/// A client configuration that trusts the public roots and `ca_file`.
pub fn client_config(ca_file: Option<&Path>) -> Result<Arc<ClientConfig>, TlsError> {
    let config = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_root_certificates(root_store(ca_file)?)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn public_roots_alone_build() {
        let config = client_config(None).expect("public roots");
        assert!(config.alpn_protocols.is_empty());
    }

    #[test]
    fn a_missing_or_empty_ca_file_is_named() {
        let missing =
            client_config(Some(Path::new("/nonexistent/ca.pem"))).expect_err("missing file");
        assert!(
            missing.to_string().contains("/nonexistent/ca.pem"),
            "{missing}"
        );

        let dir = std::env::temp_dir().join(format!("txmgr-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let empty = dir.join("empty.pem");
        std::fs::write(&empty, "no certificate here\n").expect("write");
        let err = client_config(Some(&empty)).expect_err("no certificate");
        assert!(err.to_string().contains("no PEM certificate"), "{err}");
    }

    #[test]
    fn a_private_ca_is_added_to_the_public_roots() {
        let key = rcgen::KeyPair::generate().expect("key");
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca = params.self_signed(&key).expect("self-signed CA");
        let dir = std::env::temp_dir().join(format!("txmgr-tls-ca-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join("ca.pem");
        std::fs::write(&path, ca.pem()).expect("write");
        let roots = root_store(Some(&path)).expect("roots");
        assert_eq!(roots.len(), webpki_roots::TLS_SERVER_ROOTS.len() + 1);
    }
}
