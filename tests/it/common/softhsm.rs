//! SoftHSM2 tokens for the `pkcs11` signer's tests: each test gets its own
//! token directory and `SOFTHSM2_CONF`, a token and secp256k1 keys made
//! with `softhsm2-util` and OpenSC's `pkcs11-tool` (Debian `softhsm2`,
//! `opensc`; `scripts/test.sh` installs them). A missing tool fails the test.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use alloy::primitives::{keccak256, Address};

/// Debian's SoftHSM2 module.
pub(crate) const MODULE: &str = "/usr/lib/softhsm/libsofthsm2.so";
/// The user PIN of every test token.
pub(crate) const PIN: &str = "246810";
const SO_PIN: &str = "13579111";

/// One SoftHSM2 installation: its configuration, token directory and PIN file.
pub(crate) struct SoftHsm {
    dir: PathBuf,
    /// The `SOFTHSM2_CONF` file; every process using the token needs it.
    pub(crate) conf: PathBuf,
    /// Where the tokens live (moved away, the token is "removed").
    pub(crate) tokens: PathBuf,
    /// A file holding [`PIN`].
    pub(crate) pin_file: PathBuf,
}

impl SoftHsm {
    /// A fresh token `label` in its own directory.
    pub(crate) fn new(label: &str) -> SoftHsm {
        assert!(
            Path::new(MODULE).is_file(),
            "{MODULE} is missing: install Debian's softhsm2 (scripts/test.sh does)"
        );
        let dir = std::env::temp_dir().join(format!("txmgr-hsm-{}", uuid::Uuid::new_v4().simple()));
        let tokens = dir.join("tokens");
        std::fs::create_dir_all(&tokens).expect("token directory");
        let conf = dir.join("softhsm2.conf");
        std::fs::write(
            &conf,
            format!(
                "directories.tokendir = {}\nobjectstore.backend = file\nlog.level = ERROR\nslots.removable = true\n",
                tokens.display()
            ),
        )
        .expect("softhsm2.conf");
        let pin_file = dir.join("pin");
        std::fs::write(&pin_file, format!("{PIN}\n")).expect("pin file");
        let hsm = SoftHsm {
            dir,
            conf,
            tokens,
            pin_file,
        };
        hsm.run(
            "softhsm2-util",
            &[
                "--init-token",
                "--free",
                "--label",
                label,
                "--pin",
                PIN,
                "--so-pin",
                SO_PIN,
            ],
        );
        hsm
    }

    /// Makes a secp256k1 key pair `key_label` (id `key_id`, hex) on token
    /// `token` and returns its address, read from the public key.
    pub(crate) fn keygen(&self, token: &str, key_label: &str, key_id: &str) -> Address {
        self.run(
            "pkcs11-tool",
            &[
                "--module",
                MODULE,
                "--token-label",
                token,
                "--login",
                "--pin",
                PIN,
                "--keypairgen",
                "--key-type",
                "EC:secp256k1",
                "--label",
                key_label,
                "--id",
                key_id,
            ],
        );
        let der = self.dir.join(format!("{key_label}.pub.der"));
        self.run(
            "pkcs11-tool",
            &[
                "--module",
                MODULE,
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
        );
        // SubjectPublicKeyInfo: the point 04 ‖ X ‖ Y closes the DER.
        let spki = std::fs::read(&der).expect("public key DER");
        assert!(
            spki.len() > 65 && spki[spki.len() - 65] == 0x04,
            "uncompressed point"
        );
        Address::from_slice(&keccak256(&spki[spki.len() - 64..])[12..])
    }

    /// Runs a SoftHSM2 or OpenSC tool against this installation.
    fn run(&self, tool: &str, args: &[&str]) {
        let output = Command::new(tool)
            .args(args)
            .env("SOFTHSM2_CONF", &self.conf)
            .output()
            .unwrap_or_else(|e| panic!("{tool}: {e} (install Debian's softhsm2 and opensc)"));
        assert!(
            output.status.success(),
            "{tool} {args:?}: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }

    /// The `signer = {…}` table for the key `key_label` of token `token`.
    pub(crate) fn signer_toml(&self, token: &str, key_label: &str) -> String {
        format!(
            "{{ kind = \"pkcs11\", module = \"{MODULE}\", token_label = \"{token}\", key_label = \"{key_label}\", pin_file = \"{}\" }}",
            self.pin_file.display()
        )
    }
}

impl Drop for SoftHsm {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
