//! What the proxy injects ([`Faults`]), what it counts ([`ProxyCounts`]),
//! and one request's fate drawn up front ([`Plan`]): every request draws
//! the same number of random values whatever the rates, so a given request
//! order yields the same fault sequence.

use std::{
    sync::atomic::{AtomicU64, Ordering},
    time::Duration,
};

use rand::{rngs::StdRng, Rng};

/// Which faults to inject; all rates are probabilities in `0.0..=1.0`.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Faults {
    /// Probability that a request is delayed by a random 0..=max_delay
    /// before anything else happens to it.
    pub(crate) delay_rate: f64,
    /// Upper bound of an injected delay.
    pub(crate) max_delay: Duration,
    /// Probability of answering HTTP 502 or 503 (random) without forwarding.
    pub(crate) error_rate: f64,
    /// Probability of resetting the connection without forwarding (the
    /// client sees a transport error).
    pub(crate) reset_rate: f64,
    /// Probability, for ANY method, of forwarding to the upstream and then
    /// resetting the connection so the client never hears the answer.
    pub(crate) drop_after_forward_rate: f64,
    /// Same as above but only for `eth_sendRawTransaction` (the broadcast
    /// reached the chain, the node never heard).
    pub(crate) send_drop_rate: f64,
    /// Answer every `eth_sendRawTransaction` with its hash without
    /// forwarding it: a backend that accepts transactions and loses them.
    pub(crate) swallow_sends: bool,
    /// Answer every `eth_blockNumber` with this height: a backend stuck
    /// behind the chain.
    pub(crate) frozen_head: Option<u64>,
    /// Hold every request this long before anything else: a backend (or
    /// a remote signer) that stalls.
    pub(crate) stall: Option<Duration>,
    /// Hold every `eth_sendRawTransaction` this long before forwarding it:
    /// a slow send path, while every other call answers at once.
    pub(crate) send_delay: Option<Duration>,
    /// Answer every `eth_sendRawTransaction` with this JSON-RPC error
    /// (code -32000): a node refusing the transaction.
    pub(crate) refuse_sends: Option<&'static str>,
    /// With `refuse_sends`: forward the send first (the upstream's pool
    /// takes it), then answer the refusal — a node that refuses what
    /// another node of the same provider already took.
    pub(crate) forward_refused_sends: bool,
    /// Answer every JSON-RPC batch (a JSON array) with HTTP 400, as
    /// providers without batch support do; single calls pass.
    pub(crate) refuse_batches: bool,
}

/// What the proxy did so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ProxyCounts {
    /// HTTP requests read completely from clients.
    pub(crate) requests: u64,
    /// Requests sent to the upstream (including those dropped afterwards).
    pub(crate) forwarded: u64,
    /// Requests held back by an injected delay.
    pub(crate) delayed: u64,
    /// Injected HTTP 502/503 answers.
    pub(crate) errors: u64,
    /// Connections reset before forwarding.
    pub(crate) resets: u64,
    /// Connections reset after forwarding, by `drop_after_forward_rate`.
    pub(crate) dropped_after_forward: u64,
    /// Connections reset after forwarding `eth_sendRawTransaction`, by
    /// `send_drop_rate`.
    pub(crate) dropped_sends: u64,
    /// Requests carrying `eth_sendRawTransaction` calls.
    pub(crate) send_requests: u64,
    /// Of those, JSON-RPC batches of more than one call.
    pub(crate) send_batches: u64,
    /// Batches refused by `refuse_batches`.
    pub(crate) refused_batches: u64,
}

#[derive(Default)]
pub(super) struct Counters {
    pub(super) requests: AtomicU64,
    pub(super) forwarded: AtomicU64,
    pub(super) delayed: AtomicU64,
    pub(super) errors: AtomicU64,
    pub(super) resets: AtomicU64,
    pub(super) dropped_after_forward: AtomicU64,
    pub(super) dropped_sends: AtomicU64,
    pub(super) send_requests: AtomicU64,
    pub(super) send_batches: AtomicU64,
    pub(super) refused_batches: AtomicU64,
}

impl Counters {
    pub(super) fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::SeqCst);
    }

    pub(super) fn snapshot(&self) -> ProxyCounts {
        ProxyCounts {
            requests: self.requests.load(Ordering::SeqCst),
            forwarded: self.forwarded.load(Ordering::SeqCst),
            delayed: self.delayed.load(Ordering::SeqCst),
            errors: self.errors.load(Ordering::SeqCst),
            resets: self.resets.load(Ordering::SeqCst),
            dropped_after_forward: self.dropped_after_forward.load(Ordering::SeqCst),
            dropped_sends: self.dropped_sends.load(Ordering::SeqCst),
            send_requests: self.send_requests.load(Ordering::SeqCst),
            send_batches: self.send_batches.load(Ordering::SeqCst),
            refused_batches: self.refused_batches.load(Ordering::SeqCst),
        }
    }
}

/// The fate of one request, drawn up front.
#[derive(Debug, Clone, Copy)]
pub(super) struct Plan {
    pub(super) delay: Option<Duration>,
    pub(super) reset: bool,
    /// `Some(status)` answers that status without forwarding.
    pub(super) error: Option<u16>,
    pub(super) drop_after_forward: bool,
    pub(super) send_drop: bool,
}

impl Plan {
    /// One request's fate under `faults`, from a fixed number of draws.
    pub(super) fn draw(faults: &Faults, rng: &mut StdRng) -> Plan {
        // Fixed number of draws per request, whatever the rates.
        let delay_roll: f64 = rng.random();
        let max_nanos = u64::try_from(faults.max_delay.as_nanos()).unwrap_or(u64::MAX);
        let delay_nanos = rng.random_range(0..=max_nanos);
        let reset_roll: f64 = rng.random();
        let error_roll: f64 = rng.random();
        let error_503: bool = rng.random();
        let drop_roll: f64 = rng.random();
        let send_drop_roll: f64 = rng.random();
        Plan {
            delay: (delay_roll < faults.delay_rate).then(|| Duration::from_nanos(delay_nanos)),
            reset: reset_roll < faults.reset_rate,
            error: (error_roll < faults.error_rate).then_some(if error_503 { 503 } else { 502 }),
            drop_after_forward: drop_roll < faults.drop_after_forward_rate,
            send_drop: send_drop_roll < faults.send_drop_rate,
        }
    }
}
