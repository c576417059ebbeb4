//! ECDSA signing of a key held in this process with libsecp256k1 (the
//! `secp256k1` crate): the same RFC 6979 signatures as k256 (deterministic
//! nonce, low `s`), in less CPU time. Signing was the largest
//! share of the engine's own CPU per intent (README "Benchmark").

use std::sync::OnceLock;

use alloy::primitives::{Signature, B256, U256};
use secp256k1::{Message, Secp256k1, SecretKey, SignOnly};

/// A secp256k1 private key. Its bytes are overwritten when it is dropped
/// (best effort: see [`SecretKey::non_secure_erase`]); it has no `Debug`.
pub(super) struct SecpKey {
    key: SecretKey,
}

/// The process's signing context, shared by every key (a node may hold
/// thousands): made once, its generator multiplication blinded with a
/// random seed (side-channel protection in depth; signatures stay
/// deterministic). Signing needs only `&`.
fn context() -> &'static Secp256k1<SignOnly> {
    static CONTEXT: OnceLock<Secp256k1<SignOnly>> = OnceLock::new();
    CONTEXT.get_or_init(|| {
        let mut context = Secp256k1::signing_only();
        context.seeded_randomize(&rand::random());
        context
    })
}

impl SecpKey {
    /// The key of the 32 big-endian bytes `bytes`; `None` when they are zero
    /// or not below the curve order. The caller wipes its copy.
    pub(super) fn from_bytes(bytes: [u8; 32]) -> Option<Self> {
        let key = SecretKey::from_byte_array(bytes).ok()?;
        Some(Self { key })
    }

    /// Signs the 32-byte prehash `hash` (RFC 6979 nonce, low `s`).
    pub(super) fn sign_hash(&self, hash: &B256) -> Signature {
        let signature = context().sign_ecdsa_recoverable(Message::from_digest(hash.0), &self.key);
        let (recovery_id, compact) = signature.serialize_compact();
        // Ids 2 and 3 (an `r` above the order) keep their parity in bit 0.
        let odd_y = i32::from(recovery_id) & 1 == 1;
        Signature::new(
            U256::from_be_slice(&compact[..32]),
            U256::from_be_slice(&compact[32..]),
            odd_y,
        )
    }
}

impl Drop for SecpKey {
    fn drop(&mut self) {
        self.key.non_secure_erase();
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failed unwrap is a failed test
mod tests {
    use super::*;
    use alloy::{
        primitives::keccak256,
        signers::{local::PrivateKeySigner, SignerSync},
    };

    #[test]
    fn signatures_equal_k256_and_recover_to_the_key_address() {
        for i in 0u32..200 {
            let secret = keccak256(format!("secp key {i}"));
            let hash = keccak256(format!("message {i}"));
            let reference = PrivateKeySigner::from_bytes(&secret).unwrap();
            let ours = SecpKey::from_bytes(secret.0).unwrap().sign_hash(&hash);
            assert_eq!(ours, reference.sign_hash_sync(&hash).unwrap(), "key {i}");
            assert_eq!(
                ours.recover_address_from_prehash(&hash).unwrap(),
                reference.address()
            );
        }
    }

    #[test]
    fn zero_and_out_of_range_keys_are_refused() {
        assert!(SecpKey::from_bytes([0; 32]).is_none());
        assert!(SecpKey::from_bytes([0xff; 32]).is_none());
    }
}
