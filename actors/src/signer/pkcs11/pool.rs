//! The logged-in sessions of one PKCS#11 module, shared by every signer
//! whose key it holds: at most `max_sessions` are open at once, across all
//! its tokens and keys. An HSM counts sessions per client (a YubiHSM 2 has
//! 16 in all, a CloudHSM client a few hundred per node), so the bound is
//! the module's, not each key's.
//!
//! ```text
//! permit (≤ max_sessions holders) ─► an idle session of the key's token
//!   ─ none ─► open < max? reserve one : evict an idle one of another token
//! ─► sign ─► back to idle (or closed / abandoned: counted out)
//! ```
//!
//! A holder of a permit always finds a session or room for one: at most
//! `max_sessions − 1` other holders have one out, so when `max_sessions`
//! are open at least one is idle.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, MutexGuard},
};

use cryptoki::object::ObjectHandle;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::metrics::{PKCS11_SESSIONS_OPEN, PKCS11_SESSIONS_OPENED};

/// A logged-in session on one token, of one generation of the module
/// (opened without close-on-drop: a session of an older generation is
/// abandoned, never closed, since its handle may now name another session),
/// and the private keys found in it so far.
pub(super) struct Pooled<S> {
    /// Label of the session's token.
    pub(super) token_label: String,
    /// The session (a `cryptoki` session; anything in the pool's tests).
    pub(super) session: S,
    /// The module's generation the session was opened in.
    pub(super) generation: u64,
    /// Private key handles found in this session, by the key's name.
    pub(super) keys: HashMap<String, ObjectHandle>,
}

/// What [`Pool::take`] hands a permit holder.
pub(super) enum Taken<S> {
    /// An idle session of the token, logged in.
    Idle(Pooled<S>),
    /// Room for a new session, already counted as open: open it, or give
    /// the room back with [`Pool::forget`]. `evicted` is an idle session of
    /// another token to close first (counted out already).
    Room {
        /// The idle session that made room, to close.
        evicted: Option<Pooled<S>>,
    },
}

struct State<S> {
    idle: Vec<Pooled<S>>,
    /// Sessions open: idle, out with a permit holder, or being opened.
    open: usize,
}

/// The module's session pool.
pub(super) struct Pool<S> {
    permits: Arc<Semaphore>,
    max: usize,
    state: Mutex<State<S>>,
    /// The module's file name, the metrics' `module` label.
    label: String,
}

impl<S> Pool<S> {
    /// A pool of at most `max` sessions for the module labelled `label`.
    pub(super) fn new(max: usize, label: String) -> Self {
        let max = max.max(1);
        metrics::gauge!(PKCS11_SESSIONS_OPEN, "module" => label.clone()).set(0.0);
        Self {
            permits: Arc::new(Semaphore::new(max)),
            max,
            state: Mutex::new(State {
                idle: Vec::new(),
                open: 0,
            }),
            label,
        }
    }

    /// `max_sessions` of the module.
    pub(super) fn max(&self) -> usize {
        self.max
    }

    /// Waits for the right to use a session (one of `max_sessions`).
    pub(super) async fn permit(&self) -> OwnedSemaphorePermit {
        // The semaphore is never closed: acquiring cannot fail.
        match self.permits.clone().acquire_owned().await {
            Ok(permit) => permit,
            Err(_) => unreachable!("the pool's semaphore is never closed"),
        }
    }

    fn state(&self) -> MutexGuard<'_, State<S>> {
        // A poisoned lock only means a thread panicked between two plain
        // field updates: the counts are still whole.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// For a permit holder: an idle session of `token_label` in generation
    /// `generation`, or room for a new one. Idle sessions of older
    /// generations are abandoned on the way.
    pub(super) fn take(&self, token_label: &str, generation: u64) -> Taken<S> {
        let mut state = self.state();
        let before = state.idle.len();
        state.idle.retain(|pooled| pooled.generation == generation);
        state.open = state.open.saturating_sub(before - state.idle.len());
        let taken = if let Some(at) = state
            .idle
            .iter()
            .rposition(|pooled| pooled.token_label == token_label)
        {
            Taken::Idle(state.idle.swap_remove(at))
        } else if state.open < self.max {
            state.open += 1;
            metrics::counter!(PKCS11_SESSIONS_OPENED, "module" => self.label.clone()).increment(1);
            Taken::Room { evicted: None }
        } else {
            // Every open session is idle or out with another holder, and
            // there are fewer of those than `max`: one is idle. Were none,
            // the new session is counted all the same (the counts stay
            // true; the gauge would show the excess).
            let evicted = state.idle.pop();
            if evicted.is_none() {
                state.open += 1;
            }
            metrics::counter!(PKCS11_SESSIONS_OPENED, "module" => self.label.clone()).increment(1);
            Taken::Room { evicted }
        };
        self.publish(&state);
        taken
    }

    /// A session back from signing: idle again if it is of `generation`,
    /// else abandoned.
    pub(super) fn put(&self, pooled: Pooled<S>, generation: u64) {
        let mut state = self.state();
        if pooled.generation == generation {
            state.idle.push(pooled);
        } else {
            state.open = state.open.saturating_sub(1);
        }
        self.publish(&state);
    }

    /// One open session the less (closed, abandoned, or room not used).
    pub(super) fn forget(&self) {
        let mut state = self.state();
        state.open = state.open.saturating_sub(1);
        self.publish(&state);
    }

    /// Takes every idle session of `token_label` out (counted out) for the
    /// caller to close: the token went away, they are dead too.
    pub(super) fn drain_token(&self, token_label: &str) -> Vec<Pooled<S>> {
        let mut state = self.state();
        let (dead, kept) = std::mem::take(&mut state.idle)
            .into_iter()
            .partition(|pooled| pooled.token_label == token_label);
        state.idle = kept;
        let dead: Vec<Pooled<S>> = dead;
        state.open = state.open.saturating_sub(dead.len());
        self.publish(&state);
        dead
    }

    /// Abandons every idle session (the module was finalised: they are
    /// gone with it).
    pub(super) fn abandon_idle(&self) {
        let mut state = self.state();
        let idle = std::mem::take(&mut state.idle);
        state.open = state.open.saturating_sub(idle.len());
        self.publish(&state);
    }

    fn publish(&self, state: &State<S>) {
        metrics::gauge!(PKCS11_SESSIONS_OPEN, "module" => self.label.clone())
            .set(state.open as f64);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failed unwrap is a failed test
mod tests {
    use super::*;

    /// Takes a session for `token` as a permit holder would: an idle one
    /// or a new one (a number), closing an evicted one.
    fn checkout(pool: &Pool<u32>, token: &str, generation: u64, next: &mut u32) -> Pooled<u32> {
        match pool.take(token, generation) {
            Taken::Idle(pooled) => pooled,
            Taken::Room { .. } => {
                *next += 1;
                Pooled {
                    token_label: token.to_owned(),
                    session: *next,
                    generation,
                    keys: HashMap::new(),
                }
            }
        }
    }

    #[tokio::test]
    async fn sessions_across_tokens_never_exceed_the_modules_bound() {
        let pool: Pool<u32> = Pool::new(2, "test.so".into());
        let mut next = 0;
        // Every order of two holders over three tokens, many rounds.
        for round in 0..30u32 {
            let tokens = ["a", "b", "c"];
            let first = tokens[(round % 3) as usize];
            let second = tokens[(round / 3 % 3) as usize];
            let p1 = pool.permit().await;
            let p2 = pool.permit().await;
            assert!(pool.permits.try_acquire().is_err(), "two permits at most");
            let s1 = checkout(&pool, first, 0, &mut next);
            let s2 = checkout(&pool, second, 0, &mut next);
            assert!(pool.state().open <= 2, "open {}", pool.state().open);
            assert_eq!(s1.token_label, first);
            assert_eq!(s2.token_label, second);
            pool.put(s1, 0);
            pool.put(s2, 0);
            drop((p1, p2));
            assert!(pool.state().open <= 2);
        }
        // One token, one holder at a time: the same session over and over.
        let opened = next;
        for _ in 0..10 {
            let s = checkout(&pool, "a", 0, &mut next);
            pool.put(s, 0);
        }
        assert!(next <= opened + 1, "an idle session of the token is reused");
    }

    #[test]
    fn a_new_generation_abandons_idle_sessions_and_returns_count_out() {
        let pool: Pool<u32> = Pool::new(3, "test.so".into());
        let mut next = 0;
        let a = checkout(&pool, "a", 0, &mut next);
        let b = checkout(&pool, "a", 0, &mut next);
        pool.put(a, 0);
        assert_eq!(pool.state().open, 2);
        // Initialised again: the idle one is gone, the one out is dropped
        // when it comes back.
        pool.abandon_idle();
        assert_eq!(pool.state().open, 1);
        pool.put(b, 1);
        assert_eq!(pool.state().open, 0);
        let c = checkout(&pool, "a", 1, &mut next);
        pool.put(c, 1);
        // A stale idle session is dropped by the next take, not handed out.
        let d = checkout(&pool, "a", 2, &mut next);
        assert_eq!(d.generation, 2);
        assert_eq!(pool.state().open, 1);
        pool.put(d, 2);
        assert_eq!(pool.drain_token("a").len(), 1);
        assert_eq!(pool.state().open, 0);
    }
}
