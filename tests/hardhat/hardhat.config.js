// Hardhat's node for the tests (tests/common/hardhat.rs starts it with
// `hardhat --config <this file> node --hostname 127.0.0.1 --port N`).
//
// Like the test anvil: chain id 31337 (TXMGR_HARDHAT_CHAIN_ID for a test of
// several chains) and the well-known dev accounts of the
// "test test ... junk" mnemonic with 10000 ETH each. Mining is chosen per test
// through TXMGR_HARDHAT_MINING:
//   auto           a block per transaction (the default)
//   interval:<ms>  a block every <ms> milliseconds; the pool queues gaps
//   manual         blocks only on evm_mine / hardhat_mine
"use strict";

function mining(spec) {
  if (!spec || spec === "auto") {
    return { auto: true, interval: 0 };
  }
  if (spec === "manual") {
    return { auto: false, interval: 0 };
  }
  const match = /^interval:(\d+)$/.exec(spec);
  if (!match || Number(match[1]) <= 0) {
    throw new Error(`TXMGR_HARDHAT_MINING=${spec}: expected auto, manual or interval:<ms>`);
  }
  return { auto: false, interval: Number(match[1]) };
}

module.exports = {
  networks: {
    hardhat: {
      chainId: Number(process.env.TXMGR_HARDHAT_CHAIN_ID || 31337),
      accounts: {
        mnemonic: "test test test test test test test test test test test junk",
        count: 10,
        accountsBalance: "10000000000000000000000",
      },
      mining: mining(process.env.TXMGR_HARDHAT_MINING),
    },
  },
};
