//! Keys in a test LocalStack (`txmgr_testkit::LocalStack`) for the
//! `aws_kms` signer tests: the SDK client the tests use to create keys, and
//! the submitter table of a KMS-backed submitter.

use alloy::{
    primitives::Address,
    signers::{
        aws::{
            aws_config::{self, BehaviorVersion, Region},
            aws_sdk_kms::{
                self,
                types::{KeySpec, KeyUsageType},
            },
            AwsSigner,
        },
        Signer,
    },
};
use txmgr_testkit::LocalStack;

/// Region every test key lives in.
pub(crate) const REGION: &str = "us-east-1";

/// Static test credentials (LocalStack accepts any), for this process and
/// the daemons it starts; no instance metadata lookups.
pub(crate) fn test_credentials() {
    std::env::set_var("AWS_ACCESS_KEY_ID", "test");
    std::env::set_var("AWS_SECRET_ACCESS_KEY", "test");
    std::env::set_var("AWS_EC2_METADATA_DISABLED", "true");
}

/// A KMS client on `localstack`.
pub(crate) async fn client(localstack: &LocalStack) -> aws_sdk_kms::Client {
    test_credentials();
    let config = aws_config::defaults(BehaviorVersion::latest())
        .region(Region::new(REGION))
        .endpoint_url(localstack.endpoint_url())
        .load()
        .await;
    aws_sdk_kms::Client::new(&config)
}

/// Creates a key of `spec` (signing); returns its id.
pub(crate) async fn create_key(client: &aws_sdk_kms::Client, spec: KeySpec) -> String {
    let created = client
        .create_key()
        .key_spec(spec)
        .key_usage(KeyUsageType::SignVerify)
        .send()
        .await
        .expect("CreateKey");
    created
        .key_metadata()
        .expect("key metadata")
        .key_id()
        .to_owned()
}

/// Creates a secp256k1 key; returns its id and Ethereum address.
pub(crate) async fn ethereum_key(client: &aws_sdk_kms::Client) -> (String, Address) {
    let key_id = create_key(client, KeySpec::EccSecgP256K1).await;
    let signer = AwsSigner::new(client.clone(), key_id.clone(), None)
        .await
        .expect("public key");
    (key_id, Signer::address(&signer))
}

/// The `[submitters."0x…"]` table of a submitter whose key is `key_id`.
pub(crate) fn submitter_table(address: Address, key_id: &str, localstack: &LocalStack) -> String {
    format!(
        "[submitters.\"{address:#x}\"]\nsigner = {{ kind = \"aws_kms\", key_id = \"{key_id}\", \
         region = \"{REGION}\", endpoint_url = \"{}\" }}\n",
        localstack.endpoint_url()
    )
}
