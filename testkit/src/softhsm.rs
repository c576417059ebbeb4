//! SoftHSM2 tokens for the `pkcs11` signer's tests and benchmark: each
//! installation gets its own token directory and `SOFTHSM2_CONF`, tokens
//! and secp256k1 keys made with `softhsm2-util` and OpenSC's `pkcs11-tool`
//! (Debian `softhsm2`, `opensc`; `scripts/test.sh` installs them). A
//! missing tool is an error (a test fails, it never skips).

use std::{
    path::{Path, PathBuf},
    process::Command,
    sync::atomic::{AtomicU64, Ordering},
};

use alloy::primitives::{keccak256, Address};

use crate::KitError;

/// Debian's SoftHSM2 module.
pub const SOFTHSM_MODULE: &str = "/usr/lib/softhsm/libsofthsm2.so";
/// The user PIN of every token made here.
pub const SOFTHSM_PIN: &str = "246810";
const SO_PIN: &str = "13579111";

/// One SoftHSM2 installation: its configuration, token directory and PIN
/// file; removed on drop.
#[derive(Debug)]
pub struct SoftHsm {
    dir: PathBuf,
    /// The `SOFTHSM2_CONF` file; every process using the tokens needs it.
    pub conf: PathBuf,
    /// Where the tokens live (moved away, the tokens are "removed").
    pub tokens: PathBuf,
    /// A file holding [`SOFTHSM_PIN`].
    pub pin_file: PathBuf,
}

impl SoftHsm {
    /// A fresh installation with the token `label`; panics on failure.
    pub fn new(label: &str) -> SoftHsm {
        Self::try_new(label).unwrap_or_else(|e| panic!("{e}"))
    }

    /// A fresh installation with the token `label`.
    pub fn try_new(label: &str) -> Result<SoftHsm, KitError> {
        if !Path::new(SOFTHSM_MODULE).is_file() {
            return Err(KitError::Tool {
                tool: "softhsm2".into(),
                reason: format!("{SOFTHSM_MODULE} is missing"),
            });
        }
        static MADE: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "txmgr-hsm-{}-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos()),
            MADE.fetch_add(1, Ordering::Relaxed)
        ));
        let io = |what: &str, e: std::io::Error| KitError::Tool {
            tool: "softhsm2".into(),
            reason: format!("{what}: {e}"),
        };
        let tokens = dir.join("tokens");
        std::fs::create_dir_all(&tokens).map_err(|e| io("token directory", e))?;
        let conf = dir.join("softhsm2.conf");
        std::fs::write(
            &conf,
            format!(
                "directories.tokendir = {}\nobjectstore.backend = file\nlog.level = ERROR\nslots.removable = true\n",
                tokens.display()
            ),
        )
        .map_err(|e| io("softhsm2.conf", e))?;
        let pin_file = dir.join("pin");
        std::fs::write(&pin_file, format!("{SOFTHSM_PIN}\n")).map_err(|e| io("PIN file", e))?;
        let hsm = SoftHsm {
            dir,
            conf,
            tokens,
            pin_file,
        };
        hsm.try_init_token(label)?;
        Ok(hsm)
    }

    /// Makes one more token `label`.
    pub fn try_init_token(&self, label: &str) -> Result<(), KitError> {
        self.run(
            "softhsm2-util",
            &[
                "--init-token",
                "--free",
                "--label",
                label,
                "--pin",
                SOFTHSM_PIN,
                "--so-pin",
                SO_PIN,
            ],
        )
    }

    /// Makes a secp256k1 key pair `key_label` (id `key_id`, hex) on token
    /// `token` and returns its address; panics on failure.
    pub fn keygen(&self, token: &str, key_label: &str, key_id: &str) -> Address {
        self.try_keygen(token, key_label, key_id)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// Makes a secp256k1 key pair `key_label` (id `key_id`, hex) on token
    /// `token` and returns its address, read from the public key.
    pub fn try_keygen(
        &self,
        token: &str,
        key_label: &str,
        key_id: &str,
    ) -> Result<Address, KitError> {
        self.run(
            "pkcs11-tool",
            &[
                "--module",
                SOFTHSM_MODULE,
                "--token-label",
                token,
                "--login",
                "--pin",
                SOFTHSM_PIN,
                "--keypairgen",
                "--key-type",
                "EC:secp256k1",
                "--label",
                key_label,
                "--id",
                key_id,
            ],
        )?;
        let der = self.dir.join(format!("{token}-{key_label}.pub.der"));
        self.run(
            "pkcs11-tool",
            &[
                "--module",
                SOFTHSM_MODULE,
                "--token-label",
                token,
                "--read-object",
                "--type",
                "pubkey",
                "--label",
                key_label,
                "-o",
                &der.display().to_string(),
            ],
        )?;
        // SubjectPublicKeyInfo: the point 04 ‖ X ‖ Y closes the DER.
        let spki = std::fs::read(&der).map_err(|e| KitError::Tool {
            tool: "pkcs11-tool".into(),
            reason: format!("reading {}: {e}", der.display()),
        })?;
        if spki.len() <= 65 || spki[spki.len() - 65] != 0x04 {
            return Err(KitError::Tool {
                tool: "pkcs11-tool".into(),
                reason: "the public key is not an uncompressed point".into(),
            });
        }
        Ok(Address::from_slice(
            &keccak256(&spki[spki.len() - 64..])[12..],
        ))
    }

    /// Runs a SoftHSM2 or OpenSC tool against this installation.
    fn run(&self, tool: &str, args: &[&str]) -> Result<(), KitError> {
        let output = Command::new(tool)
            .args(args)
            .env("SOFTHSM2_CONF", &self.conf)
            .output()
            .map_err(|e| KitError::Tool {
                tool: tool.into(),
                reason: format!("{e} (install Debian's softhsm2 and opensc)"),
            })?;
        if output.status.success() {
            return Ok(());
        }
        Err(KitError::Tool {
            tool: tool.into(),
            reason: format!(
                "{args:?}: {}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            ),
        })
    }

    /// The `signer = {…}` table for the key `key_label` of token `token`.
    pub fn signer_toml(&self, token: &str, key_label: &str) -> String {
        format!(
            "{{ kind = \"pkcs11\", module = \"{SOFTHSM_MODULE}\", token_label = \"{token}\", key_label = \"{key_label}\", pin_file = \"{}\" }}",
            self.pin_file.display()
        )
    }
}

impl Drop for SoftHsm {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
