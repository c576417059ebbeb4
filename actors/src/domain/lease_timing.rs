//! How long leases last and how often they are renewed (`[lease]`): used
//! by the store (the webhook lease) and by the actors (submitter leases), so
//! it lives below both.

use std::time::Duration;

/// Lease timing of the deployment (`[lease]`).
#[derive(Debug, Clone, Copy)]
pub struct LeaseTiming {
    /// Lease length.
    pub duration: Duration,
    /// Renewal period while leader (< duration / 2).
    pub renew_interval: Duration,
    /// Skew allowance for take-overs and the local validity margin.
    pub clock_skew: Duration,
    /// How long a leader with no open intent keeps its lease before it
    /// releases it and stops (a create brings it back at once).
    pub idle_release_after: Duration,
}
