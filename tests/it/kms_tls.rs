//! The KMS client follows the node's one trust policy (README "Deploying"):
//! LocalStack's KMS behind a TLS terminator whose certificate a test CA
//! issued is reached with the signer's `ca_file`, and refused without it —
//! the SDK's own default (the operating system's store) is not used.

use std::time::Duration;

use alloy::primitives::Address;
use txmgr_actors::signer::{build_signer, SignerSpec};
use txmgr_testkit::LocalStack;

use crate::common::{
    kms::{self, REGION},
    tls::{TestCa, TlsProxy},
};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kms_over_https_trusts_the_configured_ca_and_not_the_system_store() {
    let localstack = LocalStack::start().await;
    let client = kms::client(&localstack).await;
    let (key_id, address): (String, Address) = kms::ethereum_key(&client).await;
    let ca = TestCa::new("kms-tls");
    let upstream = localstack
        .endpoint_url()
        .trim_start_matches("http://")
        .to_owned();
    let proxy = TlsProxy::start(&ca.server("kms"), &upstream).await;
    let spec = |ca_file| SignerSpec::AwsKms {
        key_id: key_id.clone(),
        region: REGION.to_owned(),
        endpoint_url: Some(proxy.https_url()),
        ca_file,
        max_concurrency: 2,
    };
    let timeout = Duration::from_secs(5);

    let signer = build_signer(&spec(Some(ca.ca_file.clone())), address, 31337, timeout)
        .await
        .expect("the configured CA is trusted");
    assert_eq!(signer.address(), address);

    let err = build_signer(&spec(None), address, 31337, timeout)
        .await
        .expect_err("a certificate of an unknown CA is refused");
    assert!(
        err.is_transient() || err.to_string().contains("certificate"),
        "{err}"
    );
}
