//! The API's read queries (`store::tx_query`) against real PostgreSQL.
//! Rows are created with `insert_queued` and moved to later states by SQL,
//! standing in for the engine.

use crate::common::TestDb;
use alloy::primitives::{Address, Bytes, U256};
use serde_json::json;
use sqlx::PgPool;
use txmgr_actors::{
    domain::{CreateOutcome, Intent, NewIntent},
    store::{
        intents::insert_queued,
        tx_query::{self, Cursor},
    },
    SubState, SubmitterKey, TxState,
};
use uuid::Uuid;

const CHAIN: u64 = 31337;
const BLOCK_HASH: &str = "0x1111111111111111111111111111111111111111111111111111111111111111";

fn alice() -> SubmitterKey {
    SubmitterKey::new(CHAIN, Address::repeat_byte(0xaa))
}

fn transfer(value: u64) -> Intent {
    Intent {
        to: Some(Address::repeat_byte(0xbb)),
        value: U256::from(value),
        data: Bytes::from(vec![0xde, 0xad]),
        gas_limit: Some(21_000),
        max_fee_per_gas: None,
        max_priority_fee_per_gas: None,
        private: false,
        valid_until: None,
    }
}

async fn create(pool: &PgPool, submitter: SubmitterKey, request_id: &str, intent: Intent) -> Uuid {
    let outcome = insert_queued(
        pool,
        &[NewIntent::new(
            submitter,
            Some(request_id.to_owned()),
            intent,
        )],
    )
    .await
    .expect("insert_queued")
    .pop()
    .expect("one outcome");
    match outcome {
        CreateOutcome::Created(summary) => summary.tx_id,
        other => panic!("expected Created, got {other:?}"),
    }
}

fn hash(byte: u8) -> String {
    format!("0x{}", format!("{byte:02x}").repeat(32))
}

/// Moves a row to CONFIRMED with a receipt and `attempts` signed attempts.
async fn confirm(
    pool: &PgPool,
    tx_id: Uuid,
    nonce: i64,
    attempts: i32,
    receipt: serde_json::Value,
) {
    for attempt_no in 1..=attempts {
        sqlx::query(
            "INSERT INTO tx_attempt (tx_id, attempt_no, nonce, tx_hash, raw_tx, max_fee_per_gas,
                                     max_priority_fee_per_gas, gas_limit, kind, fencing_token)
             VALUES ($1, $2, $3, $4, '\\x00', 100, 1, 21000, 'original', 1)",
        )
        .bind(tx_id)
        .bind(attempt_no)
        .bind(nonce)
        .bind(hash(
            u8::try_from(attempt_no).expect("few attempts")
                + 0x10 * u8::try_from(nonce).expect("small nonce"),
        ))
        .execute(pool)
        .await
        .expect("insert attempt");
    }
    sqlx::query(
        "UPDATE managed_tx SET state = 'CONFIRMED', sub_state = 'mined', nonce = $2,
                tx_hash = $3, mined_tx_hash = $3, receipt = $4, receipt_block_number = 7,
                receipt_block_hash = $5, submit_attempts = $6, fencing_token = 1,
                confirmed_at = now(), updated_at = now()
          WHERE tx_id = $1",
    )
    .bind(tx_id)
    .bind(nonce)
    .bind(hash(0x22))
    .bind(receipt)
    .bind(BLOCK_HASH)
    .bind(attempts)
    .execute(pool)
    .await
    .expect("confirm row");
}

#[tokio::test]
async fn queued_intent_reads_back_with_the_api_shape() {
    let db = TestDb::migrated().await;
    let tx_id = create(
        &db.pool,
        alice(),
        "r-1",
        transfer(1_000_000_000_000_000_000),
    )
    .await;

    let view = tx_query::get(&db.pool, Some(&[CHAIN.into()]), tx_id)
        .await
        .expect("get")
        .expect("row exists");
    assert_eq!(view.tx_id, tx_id);
    assert_eq!(view.submitter, alice().address_hex());
    assert_eq!(view.request_id.as_deref(), Some("r-1"));
    assert_eq!(view.state, TxState::Queued);
    assert_eq!(
        view.to.as_deref(),
        Some("0xbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb")
    );
    assert_eq!(view.value, "1000000000000000000");
    assert_eq!(view.data, "0xdead");
    assert_eq!(view.attempts, 0);
    assert_eq!(
        (view.nonce, view.receipt.clone(), view.confirmed_at),
        (None, None, None)
    );

    let json = serde_json::to_value(&view).expect("serialise");
    let mut keys: Vec<&str> = json
        .as_object()
        .expect("object")
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "attempts",
            "chain_id",
            "confirmations",
            "confirmed_at",
            "created_at",
            "data",
            "last_error",
            "mined_tx_hash",
            "nonce",
            "receipt",
            "request_id",
            "state",
            "sub_state",
            "submitter",
            "to",
            "tx_hash",
            "tx_id",
            "updated_at",
            "value"
        ]
    );
    assert_eq!(json["state"], "QUEUED");
    assert!(json["receipt"].is_null());
    // RFC3339 timestamps in UTC, e.g. 2026-01-02T03:04:05.678901Z.
    let created = json["created_at"].as_str().expect("string timestamp");
    assert!(
        created.len() >= 20 && created.as_bytes()[10] == b'T' && created.ends_with('Z'),
        "{created}"
    );
}

#[tokio::test]
async fn get_is_scoped_to_the_chain_and_misses_cleanly() {
    let db = TestDb::migrated().await;
    let tx_id = create(&db.pool, alice(), "r-1", transfer(1)).await;
    assert!(tx_query::get(&db.pool, Some(&[(CHAIN + 1).into()]), tx_id)
        .await
        .expect("get")
        .is_none());
    // Without a chain filter: any chain's.
    assert!(tx_query::get(&db.pool, None, tx_id)
        .await
        .expect("get")
        .is_some());
    assert!(
        tx_query::get(&db.pool, Some(&[CHAIN.into()]), Uuid::now_v7())
            .await
            .expect("get")
            .is_none()
    );
}

#[tokio::test]
async fn contract_creation_has_no_recipient() {
    let db = TestDb::migrated().await;
    let intent = Intent {
        to: None,
        ..transfer(0)
    };
    let tx_id = create(&db.pool, alice(), "deploy", intent).await;
    let view = tx_query::get(&db.pool, Some(&[CHAIN.into()]), tx_id)
        .await
        .expect("get")
        .expect("row");
    assert_eq!(view.to, None);
    assert_eq!(view.value, "0");
    assert_eq!(
        serde_json::to_value(&view).expect("serialise")["to"],
        json!(null)
    );
}

#[tokio::test]
async fn confirmed_transaction_shows_receipt_and_attempts() {
    let db = TestDb::migrated().await;
    let tx_id = create(&db.pool, alice(), "r-1", transfer(5)).await;
    let receipt = json!({
        "status": "0x1",
        "gasUsed": "0x5208",
        "effectiveGasPrice": "0x3b9aca00",
        "blockNumber": "0x7",
        "blockHash": BLOCK_HASH,
        "logs": [],
    });
    confirm(&db.pool, tx_id, 0, 2, receipt).await;

    let view = tx_query::find_by_request_id(&db.pool, alice(), "r-1")
        .await
        .expect("find")
        .expect("row");
    assert_eq!(view.tx_id, tx_id);
    assert_eq!(view.state, TxState::Confirmed);
    assert_eq!(view.sub_state, Some(SubState::Mined));
    assert_eq!(view.nonce, Some(0));
    assert_eq!(view.attempts, 2);
    assert_eq!(view.mined_tx_hash, Some(hash(0x22)));
    assert!(view.confirmed_at.is_some());
    let receipt = serde_json::to_value(view.receipt.expect("receipt")).expect("serialise");
    assert_eq!(
        receipt,
        json!({
            "block_number": 7,
            "block_hash": BLOCK_HASH,
            "status": 1,
            "gas_used": 21000,
            "effective_gas_price": "1000000000",
        })
    );
}

#[tokio::test]
async fn odd_receipt_json_degrades_to_nulls_not_errors() {
    let db = TestDb::migrated().await;
    let tx_id = create(&db.pool, alice(), "r-1", transfer(5)).await;
    confirm(
        &db.pool,
        tx_id,
        0,
        1,
        json!({"status": true, "gasUsed": "lots"}),
    )
    .await;
    let view = tx_query::get(&db.pool, Some(&[CHAIN.into()]), tx_id)
        .await
        .expect("get")
        .expect("row");
    let receipt = view.receipt.expect("receipt");
    assert_eq!(receipt.status, Some(1));
    assert_eq!(receipt.gas_used, None);
    assert_eq!(receipt.effective_gas_price, None);
    assert_eq!(receipt.block_number, 7);
}

#[tokio::test]
async fn find_by_request_id_is_per_submitter() {
    let db = TestDb::migrated().await;
    let bob = SubmitterKey::new(CHAIN, Address::repeat_byte(0xcc));
    let alice_tx = create(&db.pool, alice(), "same", transfer(1)).await;
    let bob_tx = create(&db.pool, bob, "same", transfer(1)).await;
    let found = |key| tx_query::find_by_request_id(&db.pool, key, "same");
    assert_eq!(
        found(alice()).await.expect("find").map(|v| v.tx_id),
        Some(alice_tx)
    );
    assert_eq!(
        found(bob).await.expect("find").map(|v| v.tx_id),
        Some(bob_tx)
    );
    assert!(tx_query::find_by_request_id(&db.pool, alice(), "other")
        .await
        .expect("find")
        .is_none());
}

#[tokio::test]
async fn list_pages_in_acceptance_order_and_filters_by_state() {
    let db = TestDb::migrated().await;
    let mut ids = Vec::new();
    for i in 0..5 {
        ids.push(create(&db.pool, alice(), &format!("r-{i}"), transfer(i)).await);
    }
    // Someone else's intents never show up in alice's listing.
    create(
        &db.pool,
        SubmitterKey::new(CHAIN, Address::repeat_byte(0xcc)),
        "x",
        transfer(1),
    )
    .await;
    create(
        &db.pool,
        SubmitterKey::new(CHAIN + 1, alice().address),
        "x",
        transfer(1),
    )
    .await;

    let mut seen = Vec::new();
    let mut after: Option<Cursor> = None;
    let mut pages = 0;
    loop {
        let (items, next) = tx_query::list(&db.pool, alice(), None, 2, after)
            .await
            .expect("list");
        pages += 1;
        assert!(items.len() <= 2);
        seen.extend(items.iter().map(|v| v.tx_id));
        match next {
            Some(cursor) => {
                // The cursor survives the trip through a client as a string.
                after = Some(cursor.to_string().parse().expect("cursor parses"));
            }
            None => break,
        }
    }
    assert_eq!(seen, ids);
    assert_eq!(pages, 3);

    // An exact multiple of the page size ends without an empty extra page.
    let (items, next) = tx_query::list(&db.pool, alice(), None, 5, None)
        .await
        .expect("list");
    assert_eq!((items.len(), next), (5, None));

    confirm(&db.pool, ids[3], 0, 1, json!({"status": "0x1"})).await;
    let (confirmed, next) = tx_query::list(&db.pool, alice(), Some(TxState::Confirmed), 10, None)
        .await
        .expect("list");
    assert_eq!(
        confirmed.iter().map(|v| v.tx_id).collect::<Vec<_>>(),
        [ids[3]]
    );
    assert_eq!(next, None);
    let (queued, _) = tx_query::list(&db.pool, alice(), Some(TxState::Queued), 10, None)
        .await
        .expect("list");
    assert_eq!(queued.len(), 4);
}
