-- The W3C traceparent of an intent's create span, when tracing is on and
-- the trace is sampled: a leader or webhook on another node continues the
-- same trace. A column of its own, not a field of `intent`: the intent's
-- JSON is what the idempotency hash covers, and a retried create with
-- another traceparent is the same request. Nullable without a default, so
-- adding it rewrites nothing.
ALTER TABLE managed_tx ADD COLUMN IF NOT EXISTS trace_context TEXT;
