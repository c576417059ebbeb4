//! Deadline-bound polling. Tests wait for an observable condition, never for
//! a fixed time, so they are as fast as the system allows and fail with a
//! clear message (and the caller's location) when it never happens.

use std::future::Future;
use std::panic::Location;
use std::time::Duration;

use tokio::time::Instant;

/// Interval used by [`wait_until`]: short enough to keep tests fast, long
/// enough not to hammer PostgreSQL or anvil.
pub const DEFAULT_INTERVAL: Duration = Duration::from_millis(50);

/// Calls `probe` every `interval` until it yields `Some(value)` and returns
/// the value; panics once `timeout` has passed.
///
/// Not an `async fn` so `#[track_caller]` can report the test line that
/// waited in vain.
#[track_caller]
pub fn eventually<T, F, Fut>(
    timeout: Duration,
    interval: Duration,
    mut probe: F,
) -> impl Future<Output = T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let caller = Location::caller();
    async move {
        let started = Instant::now();
        let deadline = started + timeout;
        let mut attempts: u64 = 0;
        loop {
            attempts += 1;
            if let Some(value) = probe().await {
                return value;
            }
            let now = Instant::now();
            if now >= deadline {
                panic!(
                    "condition at {caller} not met within {timeout:?} \
                     ({attempts} attempts, {:?} elapsed)",
                    now - started
                );
            }
            tokio::time::sleep(interval.min(deadline - now)).await;
        }
    }
}

/// Waits until `probe` returns `true`, polling every [`DEFAULT_INTERVAL`];
/// panics once `timeout` has passed.
#[track_caller]
pub fn wait_until<F, Fut>(timeout: Duration, mut probe: F) -> impl Future<Output = ()>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    // `#[track_caller]` propagates, so a timeout still names the test's line.
    eventually(timeout, DEFAULT_INTERVAL, move || {
        let check = probe();
        async move { check.await.then_some(()) }
    })
}
