"""Unit tests, no daemon: the signature against the Rust test vectors, the
parsers, the retry decisions. The two ``httpx.MockTransport`` tests cover
what a real daemon cannot be made to do on demand (a read timeout of one
particular request); everything else is tested against the daemon in
``test_daemon.py``."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime

import httpx
import pytest

from txmgr_client import (
    ApiError,
    Client,
    ClientError,
    ConflictError,
    ErrorCode,
    NotFoundError,
    RateLimitedError,
    RetryPolicy,
    ServerError,
    SubState,
    Transaction,
    TransportError,
    TxState,
    UnavailableError,
)
from txmgr_client._retry import Safety, parse_retry_after, retryable_status, retryable_transport
from txmgr_client.errors import error_from_answer
from txmgr_client.models import Completion, FeedPage, WebhookEvent, parse_timestamp
from txmgr_client.webhook import VerificationFailure, WebhookVerificationError, sign, verify

# --- webhook signature: the vectors of actors/src/webhook/signature.rs -----------------------------


def test_sign_matches_the_rust_test_vector() -> None:
    assert sign(b"secret", 1_700_000_000, b"{}") == (
        "t=1700000000,v1=b8569b78799ff9e3cbff0fc2d63a33a2b57f3282abd07c37ae5e8e7d79a5f163"
    )


def reason(header: str | None, body: bytes, secret: bytes, now: int, tolerance: int = 300) -> str | None:
    try:
        verify(header, body, secret, now=now, tolerance=tolerance)
    except WebhookVerificationError as err:
        return err.reason.value
    return None


def test_verifies_within_the_tolerance_only() -> None:
    header = sign(b"k", 1000, b"body")
    assert reason(header, b"body", b"k", 1100) is None
    assert reason(header, b"body", b"k", 1300) is None  # exactly the tolerance
    assert reason(header, b"body", b"k", 700) is None  # the future is bounded the same way
    assert reason(header, b"body", b"k", 1400) == "stale_timestamp"
    assert reason(header, b"body", b"k", 699) == "stale_timestamp"
    assert reason(header, b"other", b"k", 1000) == "bad_signature"
    assert reason(header, b"body", b"other", 1000) == "bad_signature"
    assert reason("garbage", b"body", b"k", 1000) == "malformed_signature"
    assert reason(None, b"body", b"k", 1000) == "missing_signature"


def test_a_timestamp_written_otherwise_than_the_sender_writes_it_is_refused() -> None:
    header = sign(b"k", 1000, b"body")
    v1 = header.split(",v1=", 1)[1]
    for t in ["+1000", "01000", " 1000", "1000 ", "1e3", "-1000", "", "１０００", "1000.0"]:
        assert reason(f"t={t},v1={v1}", b"body", b"k", 1000) == "malformed_signature", t
    assert reason(f"t=1000,v1={v1}", b"body", b"k", 1000) is None
    assert reason(f"v1={v1},t=1000", b"body", b"k", 1000) is None  # order is free
    assert reason(f"t=5,t=1000,v1={v1}", b"body", b"k", 1000) is None  # the last one counts
    assert reason(f"t=1000,v1={v1.upper()}", b"body", b"k", 1000) == "bad_signature"
    assert reason(f"t=1000, v1={v1}", b"body", b"k", 1000) == "malformed_signature"
    assert reason(f"t={2**64},v1={v1}", b"body", b"k", 1000) == "malformed_signature"
    zero = sign(b"k", 0, b"body")
    assert reason(zero, b"body", b"k", 0) is None


def test_reasons_are_the_typescript_clients_names() -> None:
    assert {member.value for member in VerificationFailure} == {
        "missing_signature",
        "malformed_signature",
        "stale_timestamp",
        "bad_signature",
        "bad_body",
    }
    assert str(VerificationFailure.BAD_SIGNATURE) == "bad_signature"


def test_text_body_is_refused() -> None:
    with pytest.raises(TypeError):
        verify(sign(b"k", 1, b"{}"), "{}", b"k", now=1)  # type: ignore[arg-type]


# --- parsers --------------------------------------------------------------------------------------


def test_timestamps_with_z_offsets_and_nanoseconds() -> None:
    utc = timezone.utc
    assert parse_timestamp("2026-11-26T22:00:00Z") == datetime(2026, 11, 26, 22, 0, tzinfo=utc)
    assert parse_timestamp("2026-11-26T22:00:00.123456789Z") == datetime(
        2026, 11, 26, 22, 0, 0, 123456, tzinfo=utc
    )
    assert parse_timestamp("2026-11-26T23:30:00.5+01:30") == datetime(
        2026, 11, 26, 22, 0, 0, 500000, tzinfo=utc
    )
    with pytest.raises(ValueError):
        parse_timestamp("2026-11-26 22:00")


def test_retry_after_seconds_and_http_date() -> None:
    assert parse_retry_after("3") == 3.0
    assert parse_retry_after(None) is None
    assert parse_retry_after("soon") is None
    now = datetime(2026, 1, 1, tzinfo=timezone.utc)
    later = format_datetime(now + timedelta(seconds=7), usegmt=True)
    assert parse_retry_after(later, now=now.timestamp()) == 7.0
    earlier = format_datetime(now - timedelta(seconds=7), usegmt=True)
    assert parse_retry_after(earlier, now=now.timestamp()) == 0.0


def test_retry_decisions() -> None:
    for status in (429, 500, 502, 503, 504):
        assert retryable_status(Safety.IDEMPOTENT, status, None)
    for status in (400, 401, 403, 404, 409, 413, 415, 422, 423):
        assert not retryable_status(Safety.IDEMPOTENT, status, None)
    assert retryable_status(Safety.UNSAFE, 503, "busy")
    assert not retryable_status(Safety.UNSAFE, 503, "unavailable")
    assert not retryable_status(Safety.UNSAFE, 429, "rate_limited")
    request = httpx.Request("POST", "http://x")
    assert retryable_transport(Safety.UNSAFE, httpx.ConnectError("refused", request=request))
    assert not retryable_transport(Safety.UNSAFE, httpx.ReadTimeout("slow", request=request))
    assert retryable_transport(Safety.IDEMPOTENT, httpx.ReadTimeout("slow", request=request))
    assert retryable_transport(
        Safety.IDEMPOTENT, httpx.RemoteProtocolError("closed", request=request)
    )


def test_backoff_honours_retry_after_and_the_budget() -> None:
    policy = RetryPolicy(initial_backoff=1.0, max_backoff=4.0, max_elapsed=10.0)
    for _ in range(50):
        assert 5.0 <= policy.delay(1, retry_after=5.0) <= 5.5
        assert 0.5 <= policy.delay(1) <= 1.0
        assert 2.0 <= policy.delay(9) <= 4.0
    assert policy.allows(1, started=0.0, wait=5.0, now=1.0)
    assert not policy.allows(1, started=0.0, wait=9.5, now=1.0)
    assert not policy.allows(1, started=0.0, wait=1.0, deadline=1.5, now=1.0)
    assert not RetryPolicy(max_attempts=2).allows(2, started=0.0, wait=0.0, now=0.0)


# --- errors ----------------------------------------------------------------------------------------


def answer(code: str, **extra: object) -> bytes:
    return json.dumps({"error": {"code": code, "message": "m", **extra}}).encode()


def test_error_answers_map_to_typed_errors() -> None:
    err = error_from_answer(400, {}, answer("invalid_request", field="to"))
    assert type(err) is ClientError and err.code is ErrorCode.INVALID_REQUEST and err.field == "to"
    err = error_from_answer(
        409, {}, answer("idempotency_conflict", field="request_id", tx_id="0190abcd-0000-7000-8000-000000000000")
    )
    assert isinstance(err, ConflictError) and err.tx_id == "0190abcd-0000-7000-8000-000000000000"
    err = error_from_answer(404, {}, answer("aged_out"))
    assert isinstance(err, NotFoundError) and err.code == "aged_out"
    err = error_from_answer(429, {"retry-after": "2"}, answer("rate_limited"))
    assert isinstance(err, RateLimitedError) and err.retry_after == 2.0
    err = error_from_answer(503, {"retry-after": "1"}, answer("busy"))
    assert isinstance(err, UnavailableError) and err.code is ErrorCode.BUSY
    err = error_from_answer(500, {}, answer("internal"))
    assert type(err) is ServerError
    err = error_from_answer(403, {}, answer("policy_violation", field="to", rule="allowed_to"))
    assert err.rule == "allowed_to" and err.field == "to"
    err = error_from_answer(418, {}, answer("brand_new_code"))
    assert err.code == "brand_new_code" and not isinstance(err.code, ErrorCode)
    err = error_from_answer(502, {}, b"<html>bad gateway</html>")
    assert isinstance(err, ServerError) and err.code is None and "bad gateway" in err.message
    assert isinstance(err, ApiError)


# --- models -------------------------------------------------------------------------------------------


TX = {
    "chain_id": 31337,
    "tx_id": "0190abcd-0000-7000-8000-000000000000",
    "submitter": "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266",
    "request_id": "order-1",
    "state": "TRACKING",
    "sub_state": "awaiting_receipt",
    "nonce": 3,
    "tx_hash": "0x" + "11" * 32,
    "mined_tx_hash": None,
    "to": "0x000000000000000000000000000000000000dead",
    "value": "115792089237316195423570985008687907853269984665640564039457584007913129639935",
    "data": "0x",
    "attempts": 1,
    "last_error": None,
    "receipt": None,
    "confirmations": None,
    "created_at": "2026-11-26T22:00:00.123456789Z",
    "updated_at": "2026-11-26T22:00:01Z",
    "confirmed_at": None,
    "a_field_from_a_newer_server": {"x": 1},
}


def test_models_read_the_wire_and_ignore_unknown_fields() -> None:
    tx = Transaction.from_json(TX)
    assert tx.state is TxState.TRACKING and tx.sub_state is SubState.AWAITING_RECEIPT
    assert tx.value == 2**256 - 1 and not tx.is_final
    assert tx.raw["a_field_from_a_newer_server"] == {"x": 1}
    newer = Transaction.from_json(dict(TX, state="SOMETHING_NEW", sub_state="new_detail"))
    assert newer.state == "SOMETHING_NEW" and newer.sub_state == "new_detail"
    row = {
        "cursor": "7-3",
        "chain_id": 31337,
        "tx_id": None,
        "submitter": TX["submitter"],
        "request_id": None,
        "state": "LOW_BALANCE",
        "tx_hash": None,
        "block_number": None,
        "nonce": None,
        "reason": None,
        "balance_wei": "10",
        "min_balance_wei": "100",
        "completed_at": "2026-11-26T22:00:00Z",
        "extra": True,
    }
    page = FeedPage.from_json({"items": [row], "next_after": "7-3", "more": 1})
    assert page.items[0].is_funds and page.items[0].balance_wei == 10
    assert isinstance(page.items[0], Completion)
    event = WebhookEvent.from_json(dict(row, id="hook:7-3", webhook="hook"))
    assert event.id == "hook:7-3" and event.cursor == "7-3"


# --- retries of one request (httpx.MockTransport) ------------------------------------------------------------


def test_speed_up_is_not_retried_after_a_read_timeout_but_a_create_is() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if len(seen) == 1:
            raise httpx.ReadTimeout("slow", request=request)
        return httpx.Response(
            202,
            json={
                "chain_id": 31337,
                "tx_id": "0190abcd-0000-7000-8000-000000000000",
                "state": "QUEUED",
                "submitter": TX["submitter"],
                "request_id": json.loads(request.content)["request_id"],
            },
        )

    fast = RetryPolicy(initial_backoff=0.01, max_backoff=0.02)
    http = httpx.Client(base_url="http://txmgr.test", transport=httpx.MockTransport(handler))
    with Client(http_client=http, retry=fast) as txmgr:
        created = txmgr.create(TX["submitter"], to=TX["to"], value=1)  # type: ignore[arg-type]
        assert len(seen) == 2 and seen[0].content == seen[1].content
        assert created.request_id == json.loads(seen[0].content)["request_id"]
        seen.clear()
        with pytest.raises(TransportError):
            txmgr.speed_up("0190abcd-0000-7000-8000-000000000000")
        assert len(seen) == 1
    http.close()


# --- the feed's end (httpx.MockTransport) ------------------------------------------------------------


def scripted_feed(pages: list[dict[str, object]]) -> tuple[httpx.Client, list[str | None]]:
    """A transport answering ``pages`` in turn (the last one once they run
    out) to ``GET /v1/completions``, recording each request's ``after``."""
    afters: list[str | None] = []

    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/v1/completions"
        afters.append(request.url.params.get("after"))
        return httpx.Response(200, json=pages[min(len(afters), len(pages)) - 1])

    transport = httpx.MockTransport(handler)
    return httpx.Client(base_url="http://txmgr.test", transport=transport), afters


def feed_row(cursor: str, tx_id: str, state: str = "CONFIRMED") -> dict[str, object]:
    return {
        "cursor": cursor,
        "chain_id": 31337,
        "tx_id": tx_id,
        "submitter": TX["submitter"],
        "state": state,
        "completed_at": "2025-01-01T00:00:00Z",
    }


def test_feed_end_is_one_request_from_the_end() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"items": [], "next_after": "41-7" if len(seen) == 1 else None})

    http = httpx.Client(base_url="http://txmgr.test", transport=httpx.MockTransport(handler))
    with http, Client(http_client=http) as txmgr:
        assert txmgr.feed_end() == "41-7"
        assert txmgr.feed_end() is None  # an empty feed
    assert [(r.method, r.url.path, r.url.query) for r in seen] == [
        ("GET", "/v1/completions", b"after=end&limit=1")
    ] * 2


def test_from_the_end_of_an_empty_feed_the_readers_go_on_from_its_beginning() -> None:
    # Asking for "the end" again would pass over a row completed in between.
    a, b = "0190abcd-0000-7000-8000-00000000000a", "0190abcd-0000-7000-8000-00000000000b"
    empty: dict[str, object] = {"items": [], "next_after": None}
    rows: dict[str, object] = {
        "items": [feed_row("7-1", a), feed_row("7-2", b, "FAILED_FINAL")],
        "next_after": "7-2",
    }
    http, afters = scripted_feed([empty, rows])
    with http, Client(http_client=http) as txmgr:
        follower = txmgr.follow(after="end", wait=1.0)
        pages = iter(follower)
        assert next(pages).next_after is None and follower.cursor is None
        assert next(pages).next_after == "7-2" and follower.cursor == "7-2"
    assert afters == ["end", None]

    http, afters = scripted_feed([empty, rows])
    with http, Client(http_client=http) as txmgr:
        done = txmgr.wait_final([a, b], timeout=5, after="end")
    assert {k: v.state for k, v in done.items()} == {a: "CONFIRMED", b: "FAILED_FINAL"}
    assert afters[:2] == ["end", None]

    # From the end of a feed with rows: its position, then after it.
    http, afters = scripted_feed([{"items": [], "next_after": "5-3"}, rows])
    with http, Client(http_client=http) as txmgr:
        follower = txmgr.follow(after="end", wait=1.0)
        pages = iter(follower)
        assert next(pages).next_after == "5-3" and follower.cursor == "5-3"
        next(pages)
    assert afters == ["end", "5-3"]
