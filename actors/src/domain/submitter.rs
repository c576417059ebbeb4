//! Identity of a submitter: a signing address on one chain.

use std::fmt;

use alloy::primitives::Address;

use super::ChainId;

/// A submitter is identified by `(chain_id, address)`: the same key is often
/// used on several chains, and one database may serve one deployment per chain.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SubmitterKey {
    /// EIP-155 chain id of the deployment this submitter belongs to.
    pub chain_id: ChainId,
    /// The signing address.
    pub address: Address,
}

impl SubmitterKey {
    /// Builds a key from its parts; the chain id as a [`ChainId`] or as the
    /// `u64` configuration holds.
    pub fn new(chain_id: impl Into<ChainId>, address: Address) -> Self {
        Self {
            chain_id: chain_id.into(),
            address,
        }
    }

    /// The address as stored in the database: lower-case `0x` hex.
    pub fn address_hex(&self) -> String {
        format!("{:#x}", self.address)
    }
}

impl fmt::Display for SubmitterKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}", self.address_hex(), self.chain_id)
    }
}

impl fmt::Debug for SubmitterKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn address_is_stored_lower_case_with_prefix() {
        let address: Address = "0xF39Fd6e51aad88F6F4ce6aB8827279cffFb92266"
            .parse()
            .expect("valid address literal");
        let key = SubmitterKey::new(31337, address);
        assert_eq!(
            key.address_hex(),
            "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266"
        );
        assert_eq!(
            key.to_string(),
            "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266@31337"
        );
    }
}
