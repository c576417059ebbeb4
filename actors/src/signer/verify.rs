//! Checks a signed transaction returned by an untrusted signer against the
//! request: right signer, same fields, well-formed encoding.

use alloy::{
    consensus::{Transaction, TxEnvelope, TypedTransaction},
    eips::{eip2718::Decodable2718, Typed2718},
    primitives::{keccak256, Address},
};

use super::{SignedRaw, SignerError};

/// Decodes `raw`, checks it recovers to `expected` and signs exactly
/// `requested`, and returns it with its hash.
pub(super) fn verify_signed(
    requested: &TypedTransaction,
    raw: &[u8],
    expected: Address,
) -> Result<SignedRaw, SignerError> {
    let mut buf = raw;
    let envelope = TxEnvelope::decode_2718(&mut buf).map_err(|e| {
        SignerError::Refused(format!("remote signer returned undecodable bytes: {e}"))
    })?;
    if !buf.is_empty() {
        return Err(SignerError::Refused(format!(
            "remote signer returned {} trailing bytes after the transaction",
            buf.len()
        )));
    }
    // Recovered by hand: alloy's `SignerRecoverable` needs a consensus
    // feature we do not otherwise use.
    let got = envelope
        .signature()
        .recover_address_from_prehash(&envelope.signature_hash())
        .map_err(|e| {
            SignerError::Refused(format!("remote signer returned an invalid signature: {e}"))
        })?;
    if got != expected {
        return Err(SignerError::WrongAddress { expected, got });
    }
    let signed = TypedTransaction::from(envelope);
    if let Some(field) = first_difference(requested, &signed) {
        return Err(SignerError::Tampered { field });
    }
    Ok(SignedRaw {
        raw: raw.to_vec().into(),
        hash: keccak256(raw),
    })
}

/// Names the first field in which `signed` differs from `requested`, or
/// `None` when they are identical. The named checks give a useful message;
/// the final whole-value comparison catches anything they do not name.
fn first_difference(
    requested: &TypedTransaction,
    signed: &TypedTransaction,
) -> Option<&'static str> {
    let checks: [(&'static str, bool); 10] = [
        ("type", requested.ty() == signed.ty()),
        ("chain id", requested.chain_id() == signed.chain_id()),
        ("nonce", requested.nonce() == signed.nonce()),
        ("to", requested.kind() == signed.kind()),
        ("value", requested.value() == signed.value()),
        ("input", requested.input() == signed.input()),
        ("gas limit", requested.gas_limit() == signed.gas_limit()),
        ("gas price", requested.gas_price() == signed.gas_price()),
        (
            "max fee per gas",
            requested.max_fee_per_gas() == signed.max_fee_per_gas(),
        ),
        (
            "max priority fee per gas",
            requested.max_priority_fee_per_gas() == signed.max_priority_fee_per_gas(),
        ),
    ];
    checks
        .into_iter()
        .find_map(|(field, same)| (!same).then_some(field))
        .or_else(|| (requested != signed).then_some("access list or authorizations"))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failed unwrap is a failed test
mod tests {
    use super::*;
    use alloy::{
        consensus::{SignableTransaction, TxEip1559, TxLegacy},
        eips::eip2718::Encodable2718,
        primitives::{address, Bytes, TxKind, U256},
        signers::{local::PrivateKeySigner, SignerSync},
    };

    fn key() -> PrivateKeySigner {
        "ac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80"
            .parse()
            .unwrap()
    }

    fn request() -> TypedTransaction {
        TypedTransaction::Eip1559(TxEip1559 {
            chain_id: 31337,
            nonce: 3,
            gas_limit: 21_000,
            max_fee_per_gas: 2_000_000_000,
            max_priority_fee_per_gas: 1,
            to: TxKind::Call(address!("70997970C51812dc3A010C7d01b50e0d17dc79C8")),
            value: U256::from(5),
            input: Bytes::new(),
            ..Default::default()
        })
    }

    fn sign(tx: TypedTransaction, key: &PrivateKeySigner) -> Vec<u8> {
        let sig = key.sign_hash_sync(&tx.signature_hash()).unwrap();
        TxEnvelope::from((tx, sig)).encoded_2718()
    }

    #[test]
    fn identical_transaction_is_accepted_with_keccak_hash() {
        let raw = sign(request(), &key());
        let out = verify_signed(&request(), &raw, key().address()).unwrap();
        assert_eq!(out.hash, keccak256(&raw));
        assert_eq!(out.raw.as_ref(), raw.as_slice());
    }

    #[test]
    fn each_swapped_field_is_named() {
        type Mutation = fn(&mut TxEip1559);
        let cases: Vec<(&str, Mutation)> = vec![
            ("nonce", |t| t.nonce += 1),
            ("to", |t| t.to = TxKind::Create),
            ("value", |t| t.value += U256::from(1)),
            ("input", |t| t.input = Bytes::from_static(&[1])),
            ("gas limit", |t| t.gas_limit += 1),
            ("max fee per gas", |t| t.max_fee_per_gas += 1),
            ("max priority fee per gas", |t| {
                t.max_priority_fee_per_gas += 1
            }),
            ("chain id", |t| t.chain_id = 1),
        ];
        for (field, mutate) in cases {
            let TypedTransaction::Eip1559(mut tx) = request() else {
                unreachable!()
            };
            mutate(&mut tx);
            let raw = sign(TypedTransaction::Eip1559(tx), &key());
            let err = verify_signed(&request(), &raw, key().address()).unwrap_err();
            assert!(
                matches!(err, SignerError::Tampered { field: f } if f == field),
                "{field}: {err:?}"
            );
        }
    }

    #[test]
    fn other_type_is_tampering() {
        let legacy = TypedTransaction::Legacy(TxLegacy {
            chain_id: Some(31337),
            nonce: 3,
            gas_limit: 21_000,
            gas_price: 2_000_000_000,
            to: TxKind::Call(Address::ZERO),
            ..Default::default()
        });
        let raw = sign(legacy, &key());
        let err = verify_signed(&request(), &raw, key().address()).unwrap_err();
        assert!(
            matches!(err, SignerError::Tampered { field: "type" }),
            "{err:?}"
        );
    }

    #[test]
    fn other_signer_is_wrong_address() {
        let other = PrivateKeySigner::random();
        let raw = sign(request(), &other);
        let err = verify_signed(&request(), &raw, key().address()).unwrap_err();
        assert!(
            matches!(err, SignerError::WrongAddress { got, .. } if got == other.address()),
            "{err:?}"
        );
    }

    #[test]
    fn garbage_and_trailing_bytes_are_refused() {
        let err = verify_signed(&request(), &[0x02, 0xff], key().address()).unwrap_err();
        assert!(matches!(err, SignerError::Refused(_)), "{err:?}");
        let mut raw = sign(request(), &key());
        raw.push(0);
        let err = verify_signed(&request(), &raw, key().address()).unwrap_err();
        assert!(matches!(err, SignerError::Refused(_)), "{err:?}");
    }
}
