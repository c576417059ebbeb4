//! A W3C trace context stored with an intent (`managed_tx.trace_context`):
//! every later step of the intent, on any node, records its span under it
//! (`intent_trace`). A value type of the domain, so that the intent, the
//! store and the chain port can carry it without depending on the tracing.

use opentelemetry::{
    trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState},
    Context,
};

/// A stored W3C trace context: `00-<trace id>-<parent span id>-<flags>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceParent {
    trace_id: TraceId,
    span_id: SpanId,
    sampled: bool,
}

impl TraceParent {
    /// Parses a `traceparent` (version 00; the W3C rules: lower-case hex,
    /// neither id all zeros). `None` for anything else.
    pub fn parse(text: &str) -> Option<TraceParent> {
        let mut parts = text.trim().split('-');
        let (version, trace, span, flags) =
            (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        let lower_hex = |s: &str, len: usize| {
            s.len() == len
                && s.bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        };
        if parts.next().is_some()
            || version != "00"
            || !lower_hex(trace, 32)
            || !lower_hex(span, 16)
            || !lower_hex(flags, 2)
        {
            return None;
        }
        let trace_id = TraceId::from_hex(trace).ok()?;
        let span_id = SpanId::from_hex(span).ok()?;
        let flags = u8::from_str_radix(flags, 16).ok()?;
        (trace_id != TraceId::INVALID && span_id != SpanId::INVALID).then_some(TraceParent {
            trace_id,
            span_id,
            sampled: flags & 1 == 1,
        })
    }

    /// The context of a span (the create's), when it is valid.
    pub fn of(context: &SpanContext) -> Option<TraceParent> {
        context.is_valid().then(|| TraceParent {
            trace_id: context.trace_id(),
            span_id: context.span_id(),
            sampled: context.is_sampled(),
        })
    }

    /// The trace id, 32 lower-case hex digits.
    pub fn trace_id(&self) -> String {
        self.trace_id.to_string()
    }

    /// Whether the trace is recorded (the sampling decision of its root).
    pub fn sampled(&self) -> bool {
        self.sampled
    }

    /// The `traceparent` header value.
    pub fn header(&self) -> String {
        format!(
            "00-{}-{}-{:02x}",
            self.trace_id,
            self.span_id,
            u8::from(self.sampled)
        )
    }

    /// The context to continue from, as a remote parent.
    pub fn context(&self) -> Context {
        let flags = if self.sampled {
            TraceFlags::SAMPLED
        } else {
            TraceFlags::default()
        };
        Context::new().with_remote_span_context(SpanContext::new(
            self.trace_id,
            self.span_id,
            flags,
            true,
            TraceState::default(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_traceparent_round_trips_and_malformed_ones_are_refused() {
        let text = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let parsed = TraceParent::parse(text).expect("valid");
        assert_eq!(parsed.header(), text);
        assert!(parsed.sampled());
        assert_eq!(parsed.trace_id(), "4bf92f3577b34da6a3ce929d0e0e4736");
        let unsampled =
            TraceParent::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00")
                .expect("valid");
        assert!(!unsampled.sampled());
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-00",
            "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
        ] {
            assert_eq!(TraceParent::parse(bad), None, "{bad:?}");
        }
    }
}
