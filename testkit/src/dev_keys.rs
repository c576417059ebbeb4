//! anvil's (and Hardhat's) well-known dev accounts: public test keys, funded
//! by the node at genesis, never secrets.

/// Private key of dev account 0.
pub const DEV_PRIVATE_KEY_0: &str =
    "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80";

/// Address of [`DEV_PRIVATE_KEY_0`], checksummed.
pub const DEV_ADDRESS_0: &str = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266";

/// Address of dev account 1, the usual transfer recipient, checksummed.
pub const DEV_ADDRESS_1: &str = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8";
