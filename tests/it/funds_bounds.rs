//! Bounds on top-ups across targets (README "Funds"): a funder's
//! `funding_max_per_day` bounds what it sends over every submitter it funds,
//! checked by each target's leader under a lock on the funder, so the total
//! never exceeds it.

use std::time::Duration;

use serde_json::json;
use txmgr_testkit::Anvil;

use crate::common::{
    daemon::DEV_KEYS,
    node::{config_toml, TestNode},
    wait_until, TestDb, DEV,
};

const ETH: u128 = 1_000_000_000_000_000_000;
const FUNDER_VAR: &str = "TXMGR_TEST_BOUNDS_FUNDER_KEY";
const SECOND_VAR: &str = "TXMGR_TEST_BOUNDS_SECOND_KEY";
const WITHIN: Duration = Duration::from_secs(60);

async fn set_balance(anvil: &Anvil, address: &str, wei: u128) {
    anvil
        .rpc("anvil_setBalance", json!([address, format!("{wei:#x}")]))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_funders_daily_bound_holds_over_every_submitter_it_funds() {
    std::env::set_var(FUNDER_VAR, DEV_KEYS[1].0);
    std::env::set_var(SECOND_VAR, DEV_KEYS[2].0);
    let (funder, second) = (DEV_KEYS[1].1, DEV_KEYS[2].1);
    let db = TestDb::migrated().await;
    let anvil = Anvil::start_with(&["--block-time", "0.2"]).await;
    let top_up = format!(
        "min_balance = \"{ETH}\"\nfinality = {{ confirmations = 1 }}\n\
         top_up = {{ from = \"{funder}\", target = \"{}\", max_per_day = \"{}\" }}\n",
        3 * ETH,
        10 * ETH
    );
    let toml = config_toml(&db.url, &anvil.rpc_url(), "n1", &top_up)
        + &format!(
            "\n[submitters.\"{second}\"]\nsigner = {{ kind = \"env\", env = \"{SECOND_VAR}\" }}\n{top_up}\
             \n[submitters.\"{funder}\"]\nsigner = {{ kind = \"env\", env = \"{FUNDER_VAR}\" }}\n\
             finality = {{ confirmations = 1 }}\nfunding_max_per_day = \"{}\"\n",
            4 * ETH
        );
    let node = TestNode::start(&toml).await;
    // Both targets fall to 0.5 ETH: each would want 2.5 ETH, 5 in all.
    set_balance(&anvil, DEV, ETH / 2).await;
    set_balance(&anvil, second, ETH / 2).await;
    let sent = || async {
        let rows: Vec<(String, String)> = sqlx::query_as(
            "SELECT submitter, value_wei::text FROM funds_top_up WHERE funder = $1 ORDER BY created_at",
        )
        .bind(funder)
        .fetch_all(&db.pool)
        .await
        .expect("top-ups");
        rows
    };
    wait_until(WITHIN, || async { sent().await.len() == 2 }).await;
    let rows = sent().await;
    let total: u128 = rows
        .iter()
        .map(|(_, v)| v.parse::<u128>().expect("wei"))
        .sum();
    assert_eq!(total, 4 * ETH, "{rows:?}: bounded by funding_max_per_day");
    // Whichever leader looked first got its top-up in full, the other the
    // funder's rest.
    let mut values: Vec<u128> = rows.iter().map(|(_, v)| v.parse().expect("wei")).collect();
    values.sort_unstable();
    assert_eq!(values, vec![3 * ETH / 2, 5 * ETH / 2], "{rows:?}");
    assert_ne!(rows[0].0, rows[1].0, "one each");
    // Both are funded back above min_balance (2.0 ETH is enough).
    wait_until(WITHIN, || async {
        db.count("SELECT count(*) FROM tx_completion WHERE state = 'BALANCE_RESTORED'")
            .await
            == 2
    })
    .await;
    node.stop().await;
}
