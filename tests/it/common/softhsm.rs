//! SoftHSM2 tokens for the `pkcs11` signer's tests: the test kit's
//! [`SoftHsm`] (its own token directory and `SOFTHSM2_CONF` each), under the
//! names the tests use.

pub(crate) use txmgr_testkit::{SoftHsm, SOFTHSM_PIN as PIN};
