//! What a PKCS#11 module hands back, turned into Ethereum terms: the public
//! point of `CKA_EC_POINT` into an address, and the raw `r ‖ s` of
//! `CKM_ECDSA` into a recoverable, low-`s` signature (EIP-2).

use alloy::primitives::{keccak256, Address, Signature, B256, U256};

/// DER of the secp256k1 curve's OID (1.3.132.0.10), as `CKA_EC_PARAMS` holds it.
pub(super) const SECP256K1_PARAMS: [u8; 7] = [0x06, 0x05, 0x2b, 0x81, 0x04, 0x00, 0x0a];

/// The curve order n of secp256k1.
const ORDER: U256 = U256::from_be_bytes([
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe,
    0xba, 0xae, 0xdc, 0xe6, 0xaf, 0x48, 0xa0, 0x3b, 0xbf, 0xd2, 0x5e, 0x8c, 0xd0, 0x36, 0x41, 0x41,
]);

/// The 64 bytes `X ‖ Y` of an uncompressed point, from `CKA_EC_POINT`: a
/// DER OCTET STRING around `04 ‖ X ‖ Y` (PKCS#11 v2.40), or those 65 bytes
/// bare (some modules). `None` for anything else (a compressed point).
pub(super) fn uncompressed_point(ec_point: &[u8]) -> Option<[u8; 64]> {
    let bare = match ec_point {
        [0x04, 0x41, rest @ ..] if rest.len() == 65 => rest,
        [0x04, ..] if ec_point.len() == 65 => ec_point,
        _ => return None,
    };
    let (&prefix, xy) = bare.split_first()?;
    if prefix != 0x04 {
        return None;
    }
    xy.try_into().ok()
}

/// The address of the public point `X ‖ Y`.
pub(super) fn address_of(point: &[u8; 64]) -> Address {
    Address::from_slice(&keccak256(point)[12..])
}

/// `r ‖ s` (64 bytes) of `CKM_ECDSA` over `hash` as the signature that
/// recovers to `address`: `s` moved to the lower half of the order (EIP-2),
/// the parity found by recovery. `None` when the bytes are not a signature
/// of `hash` by that key.
pub(super) fn recoverable(raw: &[u8], hash: &B256, address: Address) -> Option<Signature> {
    if raw.len() != 64 {
        return None;
    }
    let r = U256::from_be_slice(&raw[..32]);
    let mut s = U256::from_be_slice(&raw[32..]);
    if r.is_zero() || s.is_zero() || r >= ORDER || s >= ORDER {
        return None;
    }
    if s > ORDER >> 1 {
        s = ORDER - s;
    }
    [false, true].into_iter().find_map(|odd_y| {
        let signature = Signature::new(r, s, odd_y);
        (signature.recover_address_from_prehash(hash).ok() == Some(address)).then_some(signature)
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failed unwrap is a failed test
mod tests {
    use super::*;
    use alloy::signers::{local::PrivateKeySigner, SignerSync};

    #[test]
    fn a_high_s_signature_is_normalised_and_recovers() {
        let key = PrivateKeySigner::random();
        let hash = keccak256(b"txmgr");
        let signature = key.sign_hash_sync(&hash).unwrap();
        // The same signature with s' = n - s, as a module may answer it.
        let mut raw = [0u8; 64];
        raw[..32].copy_from_slice(&signature.r().to_be_bytes::<32>());
        raw[32..].copy_from_slice(&(ORDER - signature.s()).to_be_bytes::<32>());
        let fixed = recoverable(&raw, &hash, key.address()).unwrap();
        assert_eq!(fixed.s(), signature.s());
        assert!(fixed.s() <= ORDER >> 1);
        assert_eq!(
            fixed.recover_address_from_prehash(&hash).unwrap(),
            key.address()
        );
        assert!(recoverable(&raw, &keccak256(b"other"), key.address()).is_none());
        assert!(recoverable(&raw[..63], &hash, key.address()).is_none());
    }

    #[test]
    fn the_point_is_read_with_or_without_its_der_wrapper() {
        let key = PrivateKeySigner::random();
        let public = key.credential().verifying_key().to_encoded_point(false);
        let bare = public.as_bytes().to_vec();
        assert_eq!(bare.len(), 65);
        let mut der = vec![0x04, 0x41];
        der.extend_from_slice(&bare);
        for encoded in [bare.clone(), der] {
            let point = uncompressed_point(&encoded).unwrap();
            assert_eq!(address_of(&point), key.address());
        }
        let compressed = key.credential().verifying_key().to_encoded_point(true);
        assert!(uncompressed_point(compressed.as_bytes()).is_none());
    }
}
