//! Creates racing on one request id from separate transactions (as from
//! several nodes) settle on the request-id key without an error: one
//! creates the intent, every other is answered with that intent, and a
//! different body under the id is a conflict naming it.

use std::{
    collections::{HashMap, HashSet},
    sync::Arc,
};

use crate::common::{txs::transfer_intent as transfer, TestDb};
use alloy::primitives::Address;
use tokio::sync::Barrier;
use txmgr_actors::{
    domain::{CreateOutcome, NewIntent},
    store::intents,
    SubmitterKey,
};
use uuid::Uuid;

const WRITERS: usize = 8;
const ROUNDS: usize = 15;

/// Round `round`'s batch: four request ids under each of two submitters
/// on two chains, in one order for every writer (opposite orders in two
/// batches would make a deadlock of any unique key, not a test of this one).
fn batch(round: usize) -> Vec<NewIntent> {
    let mut batch = Vec::new();
    for (chain, byte) in [(31337, 0x31), (31337, 0x32), (1, 0x31)] {
        let key = SubmitterKey::new(chain, Address::repeat_byte(byte));
        for i in 0..4 {
            batch.push(NewIntent::new(
                key,
                Some(format!("race-{round}-{i}")),
                transfer(1),
            ));
        }
    }
    batch
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_creates_of_one_request_id_make_one_intent_and_answer_it_to_all() {
    let db = TestDb::migrated().await;
    let barrier = Arc::new(Barrier::new(WRITERS));
    let writers: Vec<_> = (0..WRITERS)
        .map(|_| {
            let (pool, barrier) = (db.pool.clone(), Arc::clone(&barrier));
            tokio::spawn(async move {
                let mut answers = Vec::new();
                for round in 0..ROUNDS {
                    let batch = batch(round);
                    barrier.wait().await;
                    let outcomes = intents::insert_queued(&pool, &batch)
                        .await
                        .expect("a racing create is answered, never an error");
                    for (create, outcome) in batch.iter().zip(outcomes) {
                        let key = (
                            create.submitter,
                            create.request_id.clone().expect("request id"),
                        );
                        answers.push((key, outcome));
                    }
                }
                answers
            })
        })
        .collect();
    let mut created: HashMap<(SubmitterKey, String), Uuid> = HashMap::new();
    let mut answered: HashMap<(SubmitterKey, String), HashSet<Uuid>> = HashMap::new();
    for writer in writers {
        for (key, outcome) in writer.await.expect("writer") {
            let tx_id = match outcome {
                CreateOutcome::Created(summary) => {
                    assert!(
                        created.insert(key.clone(), summary.tx_id).is_none(),
                        "{key:?} created twice"
                    );
                    summary.tx_id
                }
                CreateOutcome::Existing(summary) => summary.tx_id,
                CreateOutcome::Conflict { tx_id } => panic!("{key:?}: a conflict with {tx_id}"),
            };
            answered.entry(key).or_default().insert(tx_id);
        }
    }
    let keys = ROUNDS * 12;
    assert_eq!(created.len(), keys, "every key created once");
    for (key, ids) in &answered {
        assert_eq!(
            ids.iter().collect::<Vec<_>>(),
            vec![&created[key]],
            "{key:?}: every writer is answered with the one intent"
        );
    }
    assert_eq!(
        db.count("SELECT count(*) FROM managed_tx").await,
        i64::try_from(keys).expect("small")
    );

    // Another body under a taken id: a conflict naming the owner, no row.
    let key = SubmitterKey::new(31337, Address::repeat_byte(0x31));
    let other = NewIntent::new(key, Some("race-0-0".into()), transfer(2));
    let outcome = intents::insert_queued(&db.pool, &[other])
        .await
        .expect("create");
    assert_eq!(
        outcome,
        vec![CreateOutcome::Conflict {
            tx_id: created[&(key, "race-0-0".to_owned())]
        }]
    );
    assert_eq!(
        db.count("SELECT count(*) FROM managed_tx").await,
        i64::try_from(keys).expect("small")
    );
}
