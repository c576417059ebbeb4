"""The SDK against a real daemon, anvil and PostgreSQL (``harness.Stack``).

Every request goes through the recording proxy in front of the daemon, which
lets the tests count attempts and, once, kill the daemon after it answered a
create and before the answer reached the SDK.
"""

from __future__ import annotations

import asyncio
import dataclasses
import io
import json
import re
import threading
import time
import uuid
from contextlib import redirect_stdout
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from harness import (
    DEV_KEYS,
    PAUSED_SUBMITTER,
    REVERT_CODE,
    REVERTER,
    SINK,
    WEBHOOK_SECRET,
    Exchange,
    Stack,
    wait_until,
)
from txmgr_client import (
    AsyncClient,
    Client,
    ClientError,
    Completion,
    ConflictError,
    ErrorCode,
    FeedEvent,
    NotFoundError,
    RateLimitedError,
    RetryPolicy,
    SubState,
    TxState,
    WebhookEvent,
)
from txmgr_client.webhook import (
    VerificationFailure,
    WebhookVerificationError,
    verify,
    verify_request,
)

SUBMITTER = DEV_KEYS[0][1]
OTHER_SUBMITTER = DEV_KEYS[1][1]
#: Anvil's account 1 with one letter's case changed: a bad EIP-55 checksum.
BAD_CHECKSUM = "0x70997970c51812dc3A010C7d01b50e0d17dc79C8"
#: A valid address no [submitters] entry names.
UNKNOWN_SUBMITTER = "0x9965507d1a55bcc2695c58ba16fb37d819b0a4dc"
README = Path(__file__).resolve().parent.parent / "README.md"


def rid(label: str) -> str:
    return f"py-{label}-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def txmgr(stack: Stack) -> Any:
    assert stack.daemon is not None and stack.proxy is not None
    stack.daemon.ready()
    with Client(stack.proxy.base, token=stack.tokens.client) as client:
        yield client


def posts(exchanges: list[Exchange]) -> list[Exchange]:
    return [e for e in exchanges if e.method == "POST" and e.path == "/v1/transactions"]


# --- (1) a create lands exactly once across a daemon crash --------------------------------------


def test_create_retried_across_a_sigkill_and_restart_lands_exactly_once(stack: Stack) -> None:
    daemon, proxy = stack.daemon, stack.proxy
    assert daemon is not None and proxy is not None
    daemon.ready()
    crashed: list[Exchange] = []

    def crash(exchange: Exchange) -> None:
        # The daemon committed the intent and answered; it dies before the
        # answer is relayed, and comes back once a retry has met it dead.
        crashed.append(exchange)
        daemon.kill()

        def restart() -> None:
            wait_until(
                "a retry while the daemon is down",
                lambda: any(a.status is None for a in posts(proxy.since(mark))),
                30,
                every=0.02,
            )
            daemon.start()

        threading.Thread(target=restart, daemon=True).start()

    mark = proxy.mark()
    proxy.arm("POST", "/v1/transactions", crash)
    patient = RetryPolicy(max_attempts=None, max_elapsed=60.0, initial_backoff=0.2, max_backoff=1.0)
    with Client(proxy.base, token=stack.tokens.client, retry=patient) as txmgr:
        # No request_id given: the SDK generates one and every retry reuses it.
        created = txmgr.create(SUBMITTER, to=SINK, value=12345)

        assert len(crashed) == 1
        lost = crashed[0]
        assert lost.status == 202, lost.answer
        lost_answer = json.loads(lost.answer)
        attempts = posts(proxy.since(mark))
        assert len(attempts) >= 3, attempts  # the lost one, >= 1 while down, the replay
        assert any(a.status is None for a in attempts[1:]), "no attempt met the dead daemon"
        assert attempts[-1].status == 200  # a replay
        bodies = {a.body for a in attempts}
        assert len(bodies) == 1, "every retry sends the same bytes"
        sent_id = json.loads(attempts[0].body)["request_id"]
        assert created.request_id == sent_id
        assert created.tx_id == lost_answer["tx_id"]
        assert created.replayed is True

        daemon.ready()
        same = [tx for tx in txmgr.iter_transactions(SUBMITTER) if tx.request_id == sent_id]
        assert [tx.tx_id for tx in same] == [created.tx_id]
        assert txmgr.get_by_request_id(SUBMITTER, sent_id).tx_id == created.tx_id
        final = txmgr.wait_final(created.tx_id, timeout=30)
        assert final.state is TxState.CONFIRMED
        assert final.value == 12345


# --- (2) 429 waited out; 4xx raised after one attempt -------------------------------------------


def test_rate_limited_create_waits_out_retry_after(stack: Stack) -> None:
    proxy = stack.proxy
    assert proxy is not None and stack.daemon is not None
    stack.daemon.ready()
    with Client(proxy.base, token=stack.tokens.slow) as slow:
        mark = proxy.mark()
        first = slow.create(SUBMITTER, to=SINK, value=1, request_id=rid("rate-1"))
        second = slow.create(SUBMITTER, to=SINK, value=2, request_id=rid("rate-2"))
        attempts = posts(proxy.since(mark))
        statuses = [a.status for a in attempts]
        assert statuses[0] == 202 and statuses[-1] == 202, statuses
        assert 429 in statuses, statuses
        for refused, retry in zip(attempts, attempts[1:]):
            if refused.status != 429:
                continue
            assert refused.retry_after is not None and refused.retry_after.isdigit()
            assert json.loads(refused.answer)["error"]["code"] == "rate_limited"
            waited = retry.sent_at - refused.sent_at
            assert waited >= int(refused.retry_after), (waited, refused.retry_after)
            assert retry.body == refused.body
        assert first.tx_id != second.tx_id
        assert statuses.count(429) == 1, f"Retry-After too short: {statuses}"

        # A policy that may not wait that long raises at once, with retry_after.
        mark = proxy.mark()
        hasty = Client(proxy.base, token=stack.tokens.slow, retry=RetryPolicy(max_elapsed=0.5))
        with hasty, pytest.raises(RateLimitedError) as refused_info:
            hasty.create(SUBMITTER, to=SINK, value=3, request_id=rid("rate-3"))
        err = refused_info.value
        assert err.status == 429 and err.code is ErrorCode.RATE_LIMITED
        assert err.retry_after is not None and err.retry_after >= 1
        assert err.request_id is not None and err.request_id.startswith("py-rate-3-")
        assert len(posts(proxy.since(mark))) == 1


def test_client_errors_are_raised_after_one_attempt_with_code_and_field(
    stack: Stack, txmgr: Client
) -> None:
    proxy = stack.proxy
    assert proxy is not None

    mark = proxy.mark()
    with pytest.raises(ClientError) as bad_to:
        txmgr.create(SUBMITTER, to=BAD_CHECKSUM, value=1)
    assert bad_to.value.status == 400
    assert bad_to.value.code is ErrorCode.INVALID_REQUEST
    assert bad_to.value.field == "to"
    assert [a.status for a in posts(proxy.since(mark))] == [400]

    key = rid("conflict")
    first = txmgr.create(SUBMITTER, to=SINK, value=1, request_id=key)
    mark = proxy.mark()
    with pytest.raises(ConflictError) as conflict:
        txmgr.create(SUBMITTER, to=SINK, value=2, request_id=key)
    assert conflict.value.status == 409
    assert conflict.value.code is ErrorCode.IDEMPOTENCY_CONFLICT
    assert conflict.value.field == "request_id"
    assert conflict.value.tx_id == first.tx_id
    assert [a.status for a in posts(proxy.since(mark))] == [409]

    mark = proxy.mark()
    with pytest.raises(ClientError) as unknown:
        txmgr.create(UNKNOWN_SUBMITTER, to=SINK, value=1)
    assert unknown.value.status == 422 and unknown.value.code is ErrorCode.UNKNOWN_SUBMITTER
    assert len(posts(proxy.since(mark))) == 1

    with pytest.raises(NotFoundError) as missing:
        txmgr.get(uuid.uuid4())
    assert missing.value.code is ErrorCode.NOT_FOUND

    with pytest.raises(ClientError) as bad_gas:
        txmgr.create(SUBMITTER, to=SINK, gas_limit=20_999)
    assert bad_gas.value.code is ErrorCode.INVALID_REQUEST and bad_gas.value.field == "gas_limit"

    # Actions: a cancel of a final intent is invalid_state, raised at once.
    done = txmgr.wait_final(first.tx_id, timeout=30)
    assert done.state is TxState.CONFIRMED
    mark = proxy.mark()
    with pytest.raises(ConflictError) as invalid:
        txmgr.cancel(first.tx_id, reason="too late")
    assert invalid.value.code is ErrorCode.INVALID_STATE
    assert len([e for e in proxy.since(mark) if e.method == "POST"]) == 1


def test_actions_and_deadlines_of_queued_intents(stack: Stack, txmgr: Client) -> None:
    proxy = stack.proxy
    assert proxy is not None
    queued = txmgr.create(PAUSED_SUBMITTER, to=SINK, value=1, request_id=rid("cancel"))
    read = txmgr.get(queued.tx_id)
    assert read.state is TxState.QUEUED and read.sub_state is SubState.PAUSED

    done = txmgr.cancel(queued.tx_id, reason="py-sdk test")
    assert (done.action, done.status, done.state) == ("cancel", "done", TxState.CANCELLED)
    again = txmgr.cancel(queued.tx_id)
    assert (again.status, again.state) == ("unchanged", TxState.CANCELLED)
    assert txmgr.wait_final(queued.tx_id, timeout=10).state is TxState.CANCELLED

    deadline = datetime.now(timezone.utc) + timedelta(seconds=2)
    expiring = txmgr.create(PAUSED_SUBMITTER, to=SINK, value=2, valid_until=deadline)
    for act in (txmgr.speed_up, txmgr.rebroadcast):
        mark = proxy.mark()
        with pytest.raises(ConflictError) as no_nonce:
            act(expiring.tx_id, reason="no nonce yet")
        assert no_nonce.value.code is ErrorCode.INVALID_STATE
        assert len(proxy.since(mark)) == 1
    rejected = txmgr.wait_final(expiring.tx_id, timeout=20)
    assert rejected.state is TxState.REJECTED and rejected.sub_state is SubState.EXPIRED
    assert rejected.nonce is None


# --- (3) wait_final -------------------------------------------------------------------------------


def test_wait_final_one_id_confirmed_and_failed_final(stack: Stack, txmgr: Client) -> None:
    assert stack.anvil is not None
    stack.anvil.rpc("anvil_setCode", REVERTER, REVERT_CODE)
    ok = txmgr.create(SUBMITTER, to=SINK, value=10**15, request_id=rid("ok"))
    # A fixed gas limit: the engine does not estimate (which would fail).
    bad = txmgr.create(SUBMITTER, to=REVERTER, gas_limit=60_000, request_id=rid("revert"))

    confirmed = txmgr.wait_final(ok.tx_id, timeout=30)
    assert confirmed.state is TxState.CONFIRMED
    assert confirmed.receipt is not None and confirmed.receipt.status == 1
    assert confirmed.is_final and confirmed.value == 10**15

    failed = txmgr.wait_final(bad.tx_id, timeout=30)
    assert failed.state is TxState.FAILED_FINAL
    assert failed.receipt is not None and failed.receipt.status == 0


def cursor_key(cursor: str) -> tuple[int, int]:
    """A feed cursor (``xid-seq``) as a comparable pair."""
    xid, seq = cursor.split("-")
    return int(xid), int(seq)


def paged_end(txmgr: Client) -> str | None:
    """The feed's end as paging it from the beginning finds it."""
    cursor: str | None = None
    while True:
        page = txmgr.feed(cursor, limit=1000)
        if page.next_after is None or page.next_after == cursor:
            return cursor
        cursor = page.next_after


def settle(txmgr: Client) -> dict[str, Completion]:
    """Waits until every intent created so far is final with its row served
    (read by the feed from its beginning): nothing is under way, so the
    feed's end stays put until the next create."""
    existing = [tx.tx_id for _, address in DEV_KEYS for tx in txmgr.iter_transactions(address)]
    return txmgr.wait_final(existing, timeout=60)


def one_end_request(exchanges: list[Exchange]) -> bool:
    """What ``feed_end`` sends: one ``after=end&limit=1``, answered."""
    return [(e.method, e.path, e.status) for e in exchanges] == [
        ("GET", "/v1/completions?after=end&limit=1", 200)
    ]


def test_wait_final_many_ids_reads_the_feed_not_a_get_per_id(stack: Stack, txmgr: Client) -> None:
    proxy = stack.proxy
    assert proxy is not None and stack.anvil is not None
    stack.anvil.rpc("anvil_setCode", REVERTER, REVERT_CODE)
    # An earlier completion, and nothing else under way: the end is past it and stays put.
    earlier = txmgr.create(SUBMITTER, to=SINK, value=1, request_id=rid("earlier"))
    settled = settle(txmgr)
    assert settled[earlier.tx_id].state is FeedEvent.CONFIRMED
    mark = proxy.mark()
    after = txmgr.feed_end()
    assert one_end_request(proxy.since(mark)), proxy.since(mark)
    assert after is not None, "a feed with rows has an end"
    assert cursor_key(after) >= cursor_key(settled[earlier.tx_id].cursor)
    assert after == paged_end(txmgr), "the end paging from the beginning reaches"
    from_end = txmgr.feed(after="end")
    assert (from_end.items, from_end.next_after) == ([], after), "nothing after the end"

    ids = [
        txmgr.create(SUBMITTER, to=SINK, value=i + 1, request_id=rid(f"many-{i}")).tx_id
        for i in range(3)
    ]
    ids.append(txmgr.create(OTHER_SUBMITTER, to=REVERTER, gas_limit=60_000).tx_id)

    mark = proxy.mark()
    results = txmgr.wait_final(ids, timeout=45, after=after)
    seen = proxy.since(mark)

    assert set(results) == set(ids)
    assert all(isinstance(row, Completion) for row in results.values())
    assert all(cursor_key(row.cursor) > cursor_key(after) for row in results.values())
    assert [results[i].state for i in ids] == [FeedEvent.CONFIRMED] * 3 + [FeedEvent.FAILED_FINAL]
    assert seen, "wait_final sent nothing"
    assert all(e.method == "GET" and e.path.startswith("/v1/completions?") for e in seen), [
        e.path for e in seen
    ]
    assert len(seen) < 2 * len(ids) + 2
    assert re.match(rf"/v1/completions\?after={after}&", seen[0].path), "read from the cursor taken"


# --- (4) the feed follower --------------------------------------------------------------------------


def read_all(txmgr: Client, after: str | None) -> list[Completion]:
    rows: list[Completion] = []
    cursor = after
    while True:
        page = txmgr.feed(cursor, limit=1000)
        rows.extend(page.items)
        if page.next_after is None or page.next_after == cursor:
            return rows
        cursor = page.next_after


def test_feed_follower_resumes_from_the_stored_cursor_without_gap_or_repeat(
    txmgr: Client,
) -> None:
    start = txmgr.feed_end()
    first_batch = [txmgr.create(SUBMITTER, to=SINK, value=7).tx_id for _ in range(4)]
    txmgr.wait_final(first_batch, timeout=30, after=start)

    # First run: two pages of two rows, then the process "stops".
    stored = start
    handled: list[Completion] = []
    follower = txmgr.follow(after=stored, limit=2, wait=1.0)
    for pages, page in enumerate(follower, start=1):
        handled.extend(page.items)
        stored = page.next_after  # stored with what was done with the rows
        assert follower.cursor == stored
        if pages == 2:
            break
    assert len(handled) == 4

    second_batch = [txmgr.create(SUBMITTER, to=SINK, value=8).tx_id for _ in range(3)]
    wanted = set(first_batch + second_batch)

    # Second run: a new follower from the stored cursor, while the second
    # batch completes.
    resumed = txmgr.follow(after=stored, limit=2, wait=2.0)
    deadline = time.monotonic() + 30
    for page in resumed:
        handled.extend(page.items)
        stored = page.next_after
        if wanted <= {row.tx_id for row in handled}:
            resumed.stop()
        assert time.monotonic() < deadline, "the follower did not see every completion"

    cursors = [row.cursor for row in handled]
    assert len(cursors) == len(set(cursors)), "a row was handed out twice"
    everything = read_all(txmgr, start)
    upto = [row.cursor for row in everything]
    assert stored in upto
    assert cursors == upto[: upto.index(stored) + 1], "a gap or a reordering"
    mine = [row.tx_id for row in handled if row.tx_id in wanted]
    assert sorted(mine) == sorted(wanted)


# --- (5) webhooks -----------------------------------------------------------------------------------


def test_webhook_verifier_accepts_real_deliveries_and_refuses_tampering(
    stack: Stack, txmgr: Client
) -> None:
    receiver = stack.receiver
    assert receiver is not None
    created = txmgr.create(SUBMITTER, to=SINK, value=99, request_id=rid("hook"))
    txmgr.wait_final(created.tx_id, timeout=30)
    wait_until("a delivery for the intent", lambda: bool(receiver.for_tx(created.tx_id)), 20)
    delivery = receiver.for_tx(created.tx_id)[0]

    verified = verify_request(delivery.headers, delivery.body, WEBHOOK_SECRET)
    event = verified.event
    # The envelope is not in the OpenAPI document: its fields are checked here.
    wire_fields = set(json.loads(delivery.body))
    model_fields = {f.name for f in dataclasses.fields(WebhookEvent)} - {"raw"}
    assert wire_fields == model_fields, sorted(wire_fields ^ model_fields)
    assert event.tx_id == created.tx_id and event.state is FeedEvent.CONFIRMED
    assert event.request_id == created.request_id and event.webhook == "py-sdk"
    assert verified.delivery_id == event.id == f"py-sdk:{event.cursor}"
    assert verified.event_name == "CONFIRMED" and verified.attempt is not None
    feed_row = next(row for row in read_all(txmgr, None) if row.cursor == event.cursor)
    assert feed_row.tx_id == event.tx_id and feed_row.tx_hash == event.tx_hash

    # Every delivery the daemon made so far verifies.
    with receiver.lock:
        everything = list(receiver.deliveries)
    for each in everything:
        verify_request(each.headers, each.body, WEBHOOK_SECRET)

    header = delivery.headers["x-txmgr-signature"]
    t = int(re.fullmatch(r"t=([0-9]+),v1=[0-9a-f]{64}", header).group(1))  # type: ignore[union-attr]
    assert abs(time.time() - t) < 60

    def refusal(headers: dict[str, str], body: bytes, secret: Any, **kw: Any) -> VerificationFailure:
        with pytest.raises(WebhookVerificationError) as info:
            verify_request(headers, body, secret, **kw)
        return info.value.reason

    changed = delivery.body.replace(b"CONFIRMED", b"CANCELLED")
    assert changed != delivery.body
    assert refusal(delivery.headers, changed, WEBHOOK_SECRET) is VerificationFailure.BAD_SIGNATURE
    one_byte = delivery.body[:-1] + bytes([delivery.body[-1] ^ 1])
    assert refusal(delivery.headers, one_byte, WEBHOOK_SECRET) is VerificationFailure.BAD_SIGNATURE
    assert refusal(delivery.headers, delivery.body, "not-the-secret") is VerificationFailure.BAD_SIGNATURE
    assert (
        refusal(delivery.headers, delivery.body, WEBHOOK_SECRET, now=t + 301)
        is VerificationFailure.STALE_TIMESTAMP
    )
    assert verify(header, delivery.body, WEBHOOK_SECRET, now=t + 300) == t
    no_header = {k: v for k, v in delivery.headers.items() if k != "x-txmgr-signature"}
    assert refusal(no_header, delivery.body, WEBHOOK_SECRET) is VerificationFailure.MISSING_SIGNATURE
    padded = dict(delivery.headers, **{"x-txmgr-signature": header.replace("t=", "t=0", 1)})
    assert refusal(padded, delivery.body, WEBHOOK_SECRET) is VerificationFailure.MALFORMED_SIGNATURE
    # A rotation: either secret passes.
    verify_request(delivery.headers, delivery.body, ["the-new-one", WEBHOOK_SECRET])


# --- the README's integration snippet, run as written -------------------------------------------------


def readme_snippet() -> str:
    text = README.read_text()
    match = re.search(r"<!-- tested: .*? -->\n```python\n(.*?)```", text, re.S)
    assert match, "README.md lost its tested snippet"
    return match.group(1)


def test_readme_integration_snippet(stack: Stack) -> None:
    receiver = stack.receiver
    assert receiver is not None and stack.proxy is not None and stack.daemon is not None
    stack.daemon.ready()
    recorded: list[tuple[str | None, Any]] = []
    order_id = uuid.uuid4().hex[:8]
    namespace: dict[str, Any] = {
        "TXMGR_URL": stack.proxy.base,
        "TOKEN": stack.tokens.client,
        "SUBMITTER": SUBMITTER,
        "RECIPIENT": SINK,
        "WEBHOOK_SECRET": WEBHOOK_SECRET,
        "order_id": order_id,
        "record_once": lambda delivery_id, event: recorded.append((delivery_id, event)),
    }
    out = io.StringIO()
    with redirect_stdout(out):
        exec(compile(readme_snippet(), str(README), "exec"), namespace)  # noqa: S102
    assert out.getvalue() == "CONFIRMED 1\n"
    created = namespace["created"]
    assert created.request_id == f"order-{order_id}"

    wait_until("the snippet's delivery", lambda: bool(receiver.for_tx(created.tx_id)), 20)
    delivery = receiver.for_tx(created.tx_id)[0]
    on_webhook = namespace["on_webhook"]
    assert on_webhook(delivery.headers, delivery.body) == (204, "")
    assert recorded and recorded[0][0] == delivery.headers["x-txmgr-delivery"]
    assert recorded[0][1].tx_id == created.tx_id
    tampered = delivery.body.replace(b"CONFIRMED", b"REJECTED")
    assert on_webhook(delivery.headers, tampered) == (401, "bad_signature")


# --- the async client ----------------------------------------------------------------------------------


def test_async_client_create_wait_final_and_follow(stack: Stack) -> None:
    proxy = stack.proxy
    assert proxy is not None and stack.daemon is not None
    stack.daemon.ready()
    with Client(proxy.base, token=stack.tokens.client) as sync:
        settle(sync)  # nothing under way: the feed's end stays put

    async def scenario() -> None:
        async with AsyncClient(proxy.base, token=stack.tokens.client) as txmgr:
            mark = proxy.mark()
            after = await txmgr.feed_end()
            assert one_end_request(proxy.since(mark)), proxy.since(mark)
            assert after is not None
            from_end = await txmgr.feed(after="end")
            assert (from_end.items, from_end.next_after) == ([], after), "nothing after the end"
            created = await txmgr.create(SUBMITTER, to=SINK, value=5, request_id=rid("async"))
            assert created.state is TxState.QUEUED and created.replayed is False
            again = await txmgr.create(SUBMITTER, to=SINK, value=5, request_id=created.request_id)
            assert again.tx_id == created.tx_id and again.replayed is True
            tx = await txmgr.wait_final(created.tx_id, timeout=30)
            assert tx.state is TxState.CONFIRMED and tx.tx_id == created.tx_id

            more = [
                (await txmgr.create(OTHER_SUBMITTER, to=SINK, value=6)).tx_id for _ in range(2)
            ]
            mark = proxy.mark()
            results = await txmgr.wait_final(more, timeout=30, after=after)
            assert {k: v.state for k, v in results.items()} == dict.fromkeys(
                more, FeedEvent.CONFIRMED
            )
            assert all(cursor_key(row.cursor) > cursor_key(after) for row in results.values())
            assert all(e.path.startswith("/v1/completions?") for e in proxy.since(mark))

            seen: list[str | None] = []
            follower = txmgr.follow(after=after, wait=1.0)
            async for page in follower:
                seen.extend(row.tx_id for row in page.items)
                if {created.tx_id, *more} <= set(seen):
                    follower.stop()
            assert len(seen) == len(set(seen))

            listing = await txmgr.list_transactions(OTHER_SUBMITTER, limit=1)
            assert len(listing.items) == 1 and listing.next is not None
            listed = [tx.tx_id async for tx in txmgr.iter_transactions(OTHER_SUBMITTER, page_size=2)]
            assert set(more) <= set(listed)

    asyncio.run(asyncio.wait_for(scenario(), 60))
