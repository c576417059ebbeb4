//! The integration tests: one binary, one module per topic (real
//! PostgreSQL, real anvil, and Hardhat's node for the core scenarios).
//! `common` is the shared harness on top of the `txmgr-testkit` crate.
//!
//! Run one topic with `cargo nextest run --test it -E 'test(/^lease::/)'`
//! or `scripts/test.sh -E 'test(/^lease::/)'`.

mod common;

mod actor_tree;
mod allocated_escalation;
mod bounded;
mod bounded_tracker;
mod cli;
mod cluster_balance;
mod cluster_faults;
mod cluster_node_id;
mod cluster_webhooks;
mod completions;
mod completions_http;
mod config;
mod create_fuzz;
mod db_session;
mod deadlines;
mod durability;
mod feed_retention;
mod finality;
mod funds;
mod funds_bounds;
mod group_commit;
mod hardhat_errors;
mod harness;
mod http_api;
mod https_api;
mod kms_signer;
mod kms_tls;
mod lease;
mod lease_fencing;
mod lease_keeper;
mod log_secrets;
mod metrics_promtool;
mod migrations;
mod multi_chain;
mod multi_chain_access;
mod multi_chain_bounded;
mod multi_chain_cluster;
mod multi_chain_faults;
mod multi_chain_reload;
mod node_registration;
mod nonce_cursor;
mod openapi_statuses;
mod openapi_valid;
mod ops_actions;
mod ops_api;
mod ops_dashboard;
mod ops_reload;
mod ops_roles;
mod ops_scope;
mod page_budget;
mod pause;
mod pg_tls;
mod pipeline;
mod pipeline_cluster;
mod pipeline_external;
mod pipeline_recovery;
mod pipeline_rejects;
mod policies;
mod private_sends;
mod reload_sighup;
mod reorg;
mod reorg_final;
mod resubmit;
mod resubmit_claims;
mod rpc_cost;
mod rpc_endpoints;
mod rpc_hostile;
mod rpc_proxy;
mod rpc_secrets;
mod secret_rotation;
mod speedup_bounds;
mod tls_rpc;
mod token_rate;
mod tx_actions;
mod tx_query;
mod unknown_sends;
mod webhook_window;
mod webhooks;
mod ws_head;
