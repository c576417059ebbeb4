//! `[chains.*]`: several chains in one configuration, the `[chain]`
//! shorthand beside them, validation naming each bad key, the precedence
//! of settings, and environment overrides of per-chain keys.

use txmgr::config::Config;

use super::{assert_rejects, assert_rejects_with_env, env, parse, DEV, OTHER};

/// Two chains; DEV on both, OTHER on `base` only.
const TWO_CHAINS: &str = r#"
[database]
url = "postgres://postgres@127.0.0.1:5432/txmgr"
[chains.mainnet]
chain_id = 1
rpc_urls = [{ name = "own", url = "http://127.0.0.1:8545" }]
[chains.base]
chain_id = 8453
rpc_url = "http://127.0.0.1:8546"
poll_interval = "500ms"
[submitters."0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266"]
signer = { kind = "env", env = "TXMGR_DEV_PRIVATE_KEY" }
[submitters."0x70997970c51812dc3a010c7d01b50e0d17dc79c8"]
signer = { kind = "env", env = "TXMGR_OTHER_KEY" }
chains = ["base"]
"#;

#[test]
fn two_chains_load_with_each_submitter_on_its_chains() {
    let config = parse(TWO_CHAINS).expect("valid");
    let names: Vec<&str> = config.chains().iter().map(|c| c.name).collect();
    assert_eq!(names, vec!["base", "mainnet"], "name order");
    assert_eq!(
        config.chain_named("base").expect("base").config.chain_id,
        8453
    );
    assert_eq!(config.chain_with_id(1).expect("mainnet").name, "mainnet");
    let on_mainnet: Vec<String> = config
        .resolved_submitters_on("mainnet")
        .into_iter()
        .map(|s| s.address)
        .collect();
    assert_eq!(on_mainnet, vec![DEV.to_string()]);
    assert_eq!(config.resolved_submitters_on("base").len(), 2);
    assert!(config.submitter_on("mainnet", OTHER).is_none());
    // Each chain's retry backoff follows its own poll interval.
    let base = config.submitter_on("base", DEV).expect("dev on base");
    let mainnet = config.submitter_on("mainnet", DEV).expect("dev on mainnet");
    assert!(base.settings.retry_backoff < mainnet.settings.retry_backoff);
}

#[test]
fn the_chain_shorthand_is_the_chain_named_default() {
    let config = parse(super::BASE).expect("valid");
    let chains = config.chains();
    assert_eq!(chains.len(), 1);
    assert_eq!(chains[0].name, "default");
    assert_eq!(chains[0].key, "chain");
    assert!(config.submitter(DEV).is_some());
}

#[test]
fn chain_and_chains_together_are_refused() {
    let text = format!(
        "{}\n[chains.base]\nchain_id = 8453\nrpc_url = \"http://127.0.0.1:8546\"\n",
        super::BASE
    );
    assert_rejects(&text, "chain");
}

#[test]
fn no_chain_at_all_is_refused() {
    let text = r#"
[database]
url = "postgres://postgres@127.0.0.1:5432/txmgr"
"#;
    assert_rejects(text, "chains");
}

#[test]
fn a_duplicate_chain_id_names_the_second_chain() {
    let text = TWO_CHAINS.replace("chain_id = 8453", "chain_id = 1");
    let err = assert_rejects(&text, "chains.mainnet.chain_id");
    assert!(err.to_string().contains("chains.base"), "{err}");
}

#[test]
fn a_chain_without_endpoints_is_refused() {
    let text = TWO_CHAINS.replace("rpc_url = \"http://127.0.0.1:8546\"\n", "");
    assert_rejects(&text, "chains.base.rpc_url");
}

#[test]
fn a_bad_chain_name_is_refused() {
    let text = TWO_CHAINS
        .replace("[chains.base]", "[chains.\"Base Net\"]")
        .replace("chains = [\"base\"]", "");
    assert_rejects(&text, "chains.Base Net");
}

#[test]
fn unknown_chains_of_a_submitter_are_named() {
    let text = TWO_CHAINS.replace("chains = [\"base\"]", "chains = [\"base\", \"optimism\"]");
    assert_rejects(&text, &format!("submitters.{OTHER}.chains[1]"));
    let text = format!("{TWO_CHAINS}[submitters.\"{OTHER}\".on.optimism]\nmax_in_flight = 2\n");
    assert_rejects(&text, &format!("submitters.{OTHER}.on.optimism"));
    // `on` a chain the submitter does not send on.
    let text = format!("{TWO_CHAINS}[submitters.\"{OTHER}\".on.mainnet]\nmax_in_flight = 2\n");
    assert_rejects(&text, &format!("submitters.{OTHER}.on.mainnet"));
}

#[test]
fn a_submitter_with_no_chain_is_refused() {
    let text = TWO_CHAINS.replace("chains = [\"base\"]", "chains = []");
    assert_rejects(&text, &format!("submitters.{OTHER}.chains"));
}

#[test]
fn a_bad_value_in_a_chains_defaults_is_named_there() {
    let text = TWO_CHAINS.replace(
        "poll_interval = \"500ms\"",
        "poll_interval = \"500ms\"\ndefaults = { max_in_flight = 0 }",
    );
    assert_rejects(&text, "chains.base.defaults.max_in_flight");
    let text = TWO_CHAINS.replace(
        "poll_interval = \"500ms\"",
        "poll_interval = \"500ms\"\ndefaults = { max_in_flite = 3 }",
    );
    assert!(parse(&text).is_err(), "a misspelt override is an error");
    let text = format!("{TWO_CHAINS}[submitters.\"{DEV}\".on.base]\nmax_in_flight = 0\n");
    assert_rejects(&text, &format!("submitters.{DEV}.on.base.max_in_flight"));
}

/// The configuration with some of the layers that set `max_in_flight`:
/// `D` `[defaults]`, `C` `[chains.base].defaults`, `S` the submitter's
/// entry, `O` its `on.base`. Each layer also sets another key, once.
fn layered(layers: &str) -> Config {
    let mut text = String::new();
    if layers.contains('D') {
        text.push_str("[defaults]\nmax_in_flight = 2\nbatch_size = 2\nmax_resubmits = 2\n");
    }
    text.push_str(TWO_CHAINS);
    if layers.contains('C') {
        text = text.replace(
            "poll_interval = \"500ms\"",
            "poll_interval = \"500ms\"\ndefaults = { max_in_flight = 3, batch_size = 3 }",
        );
    }
    if layers.contains('S') {
        text = text.replace(
            "env = \"TXMGR_DEV_PRIVATE_KEY\" }",
            "env = \"TXMGR_DEV_PRIVATE_KEY\" }\nmax_in_flight = 4",
        );
    }
    if layers.contains('O') {
        text.push_str(&format!(
            "[submitters.\"{DEV}\".on.base]\nmax_in_flight = 5\n"
        ));
    }
    parse(&text).unwrap_or_else(|e| panic!("{layers}: {e}"))
}

/// built-in < [defaults] < [chains.X].defaults < [submitters.A] < [submitters.A.on.X]
#[test]
fn precedence_runs_from_built_in_to_the_submitters_own_chain() {
    let builtin = txmgr_actors::submitter::SubmitterSettings::default();
    let on = |config: &Config, chain: &str| {
        config
            .submitter_on(chain, DEV)
            .expect("dev is on every chain")
            .settings
    };
    // Each layer wins over the ones below it, for the key it sets.
    assert_eq!(
        on(&layered(""), "base").max_in_flight,
        builtin.max_in_flight
    );
    assert_eq!(on(&layered("D"), "base").max_in_flight, 2);
    assert_eq!(on(&layered("DC"), "base").max_in_flight, 3);
    assert_eq!(on(&layered("DCS"), "base").max_in_flight, 4);
    assert_eq!(on(&layered("DCSO"), "base").max_in_flight, 5);
    // A key a layer leaves unset comes from the one below.
    let all = layered("DCSO");
    assert_eq!(on(&all, "base").batch_size, 3, "the chain's default");
    assert_eq!(on(&all, "base").max_resubmits, 2, "[defaults]");
    // Another chain sees neither base's defaults nor the `on.base` layer.
    assert_eq!(on(&all, "mainnet").max_in_flight, 4, "the submitter's own");
    assert_eq!(on(&all, "mainnet").batch_size, 2, "[defaults]");
}

#[test]
fn per_chain_keys_take_environment_overrides() {
    let vars = env(&[
        ("TXMGR_CHAINS__BASE__POLL_INTERVAL", "2s"),
        ("TXMGR_CHAINS__BASE__RPC_URL", "http://127.0.0.1:9999"),
    ]);
    let config = Config::from_toml_str(TWO_CHAINS, vars).expect("valid");
    let base = config.chain_named("base").expect("base");
    assert_eq!(base.config.poll_interval, std::time::Duration::from_secs(2));
    assert_eq!(
        base.config.rpc_url.as_deref(),
        Some("http://127.0.0.1:9999")
    );
    let bad = env(&[("TXMGR_CHAINS__BASE__POLL_INTERVAL", "soon")]);
    assert_rejects_with_env(TWO_CHAINS, bad, "chains.base.poll_interval");
}

#[test]
fn a_token_allow_list_names_chains_by_name_or_id() {
    let token = |entry: &str| {
        format!(
            "{TWO_CHAINS}[[auth.tokens]]\nname = \"t\"\nrole = \"client\"\nsha256 = \"{}\"\nsubmitters = [\"{entry}\"]\n",
            "ab".repeat(32)
        )
    };
    let config = parse(&token(&format!(
        "base:{}",
        DEV.to_uppercase().replace("0X", "0x")
    )))
    .expect("by name");
    assert_eq!(
        config.auth.tokens[0].submitters.as_deref(),
        Some(&[format!("8453:{DEV}")][..]),
        "normalised to the chain id and a lower-case address"
    );
    assert!(parse(&token(&format!("1:{DEV}"))).is_ok(), "by id");
    assert!(parse(&token(DEV)).is_ok(), "every chain");
    assert_rejects(
        &token(&format!("optimism:{DEV}")),
        "auth.tokens.0.submitters.0",
    );
    assert_rejects(&token("base:0x12"), "auth.tokens.0.submitters.0");
}

#[test]
fn a_webhooks_chains_filter_names_configured_chains() {
    let hook = |chains: &str| {
        format!(
            "{TWO_CHAINS}[[webhooks]]\nname = \"h\"\nurl = \"https://example.com/h\"\n\
             secret_env = \"H\"\nchains = [{chains}]\n"
        )
    };
    let config = parse(&hook("\"base\", \"1\"")).expect("by name and id");
    assert_eq!(
        config.webhooks[0].chains.as_deref(),
        Some(&["8453".to_string(), "1".to_string()][..]),
        "normalised to chain ids"
    );
    assert_rejects(&hook("\"optimism\""), "webhooks[0].chains[0]");
}
