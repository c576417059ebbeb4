"""Everything the sync and async clients share, written once, without I/O.

Each operation is a generator that *yields effects* and *receives their
results*:

- :class:`HttpCall` — the driver sends it and answers with the
  ``httpx.Response``, or with the ``httpx.TransportError`` instance when no
  answer came (passed in as a value, not thrown, so the retry loop decides);
- :class:`Sleep` — the driver sleeps (``time.sleep`` / ``asyncio.sleep``) and
  answers ``None``.

The generator's return value is the operation's result; its exceptions are
the operation's errors. ``client.Client._run`` and ``aio.AsyncClient._run``
are the only code that differs: a dozen lines each. Request building,
response parsing, the retry decisions and the waiting logic (``wait_final``,
the feed) live here.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Generator, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from enum import Enum
from typing import Any, TypeVar, Union

import httpx

from ._retry import RetryPolicy, Safety, retryable_status, retryable_transport
from .errors import ProtocolError, TransportError, WaitTimeout, error_from_answer
from .models import (
    ActionResult,
    Completion,
    CreatedTransaction,
    FeedPage,
    Transaction,
    TransactionPage,
    TxState,
)

T = TypeVar("T")

#: Longest long poll the server accepts (``MAX_WAIT``); it also cuts a poll
#: to 90 % of its ``http.request_timeout``.
MAX_FEED_WAIT = 60.0
#: Default long poll of a feed read that waits.
DEFAULT_FEED_WAIT = 30.0
#: Largest feed page (``MAX_LIMIT`` in ``src/http/completions.rs``).
MAX_FEED_LIMIT = 1000
#: ``after`` starting after the feed's current end (README "Completion feed").
FEED_END = "end"
#: Largest list page (``MAX_LIST_LIMIT`` in ``src/http/tx_reads.rs``).
MAX_LIST_LIMIT = 500
#: ``wait_final`` for one id: first pause between GETs, and its cap.
POLL_INITIAL = 0.5
POLL_MAX = 5.0
#: Longest ``request_id`` the server accepts, in characters.
MAX_REQUEST_ID_CHARS = 256


@dataclass(frozen=True)
class HttpCall:
    """One HTTP request, described without a client."""

    #: ``GET`` or ``POST``.
    method: str
    #: Path under the base URL, e.g. ``/v1/transactions``.
    path: str
    #: Query parameters in order (``chain_id`` may repeat).
    params: list[tuple[str, str]] = field(default_factory=list)
    #: JSON body, already encoded (POST only).
    body: bytes | None = None
    #: Seconds added to the client's read timeout (a long poll's ``wait``).
    extra_read_timeout: float = 0.0


@dataclass(frozen=True)
class Sleep:
    """Wait this many seconds before going on."""

    seconds: float


Effect = Union[HttpCall, Sleep]
Reply = Union[httpx.Response, httpx.TransportError, None]
Op = Generator[Effect, Reply, T]

USER_AGENT = "txmgr-client-python/0.1.0"


def headers_for(call: HttpCall, token: str | None) -> dict[str, str]:
    """The headers of ``call``: JSON in and out, and the bearer token.
    Every POST says ``Content-Type: application/json`` (the server answers 415
    without it, even for an empty body)."""
    headers = {"Accept": "application/json", "User-Agent": USER_AGENT}
    if call.method == "POST":
        headers["Content-Type"] = "application/json"
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return headers


def timeout_for(base: httpx.Timeout, call: HttpCall) -> httpx.Timeout:
    """The client's timeout, with the read timeout lengthened by a long
    poll's wait (so the client does not give up on a poll the server is
    legitimately holding open)."""
    if call.extra_read_timeout <= 0 or base.read is None:
        return base
    return httpx.Timeout(
        connect=base.connect,
        read=base.read + call.extra_read_timeout,
        write=base.write,
        pool=base.pool,
    )


# --- encoding ---------------------------------------------------------------


def text(value: object) -> str:
    """The wire text of an enum member or a string."""
    return value.value if isinstance(value, Enum) else str(value)


def tx_id_text(tx_id: str | uuid.UUID) -> str:
    """A transaction id as the server writes it (lower-case, hyphenated);
    raises ``ValueError`` for a string that is not a UUID."""
    return str(tx_id if isinstance(tx_id, uuid.UUID) else uuid.UUID(str(tx_id)))


def new_request_id() -> str:
    """A fresh ``request_id``: a random UUID (never starts with the engine's
    reserved prefixes ``txmgr-`` / ``filler:``)."""
    return str(uuid.uuid4())


def wei_text(name: str, value: int | str) -> str:
    """An amount of wei as the server wants it: a string (decimal or ``0x``
    hex). Integers are written in decimal; strings are sent as given (the
    server validates them). Floats and booleans are refused: they cannot
    carry an exact amount."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise TypeError(f"{name} must be an int or a string of wei, not {type(value).__name__}")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"{name} must not be negative")
        return str(value)
    return value


def data_text(value: str | bytes | bytearray | memoryview) -> str:
    """Call data as ``0x`` hex (bytes are encoded; a string is sent as given)."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return "0x" + bytes(value).hex()
    return value


def rfc3339(value: datetime | str) -> str:
    """A deadline as RFC 3339 in UTC; a naive ``datetime`` is refused (its
    time zone would be a guess)."""
    if isinstance(value, str):
        return value
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError("valid_until must be timezone-aware")
    return value.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


def duration_text(seconds: float) -> str:
    """A long-poll wait as the server reads it (humantime): whole
    milliseconds, at most :data:`MAX_FEED_WAIT`."""
    millis = max(0, round(min(seconds, MAX_FEED_WAIT) * 1000))
    return f"{millis}ms"


def encode_json(body: Mapping[str, Any]) -> bytes:
    """The JSON bytes of a body (compact, UTF-8)."""
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def chain_params(chain_ids: Iterable[int] | int | None) -> list[tuple[str, str]]:
    """``chain_id`` query parameters (repeatable)."""
    if chain_ids is None:
        return []
    if isinstance(chain_ids, int):
        chain_ids = [chain_ids]
    return [("chain_id", str(int(chain_id))) for chain_id in chain_ids]


def check_limit(limit: int | None, largest: int) -> None:
    """Refuses a page size the server would refuse (it answers 400)."""
    if limit is not None and not 1 <= limit <= largest:
        raise ValueError(f"limit must be from 1 to {largest}")


# --- decoding ---------------------------------------------------------------


def decode(response: httpx.Response, request_id: str | None = None) -> Any:
    """The JSON of a successful answer, or :class:`ProtocolError`."""
    try:
        return json.loads(response.content)
    except ValueError as err:
        raise ProtocolError(
            f"answer {response.status_code} is not JSON: {err}",
            status=response.status_code,
            body=response.text[:512],
            request_id=request_id,
        ) from err


def parse(
    reader: Any, response: httpx.Response, request_id: str | None = None, **extra: Any
) -> Any:
    """Decodes the answer and reads it with ``reader.from_json``; a shape the
    reader cannot read is a :class:`ProtocolError`."""
    data = decode(response, request_id)
    if not isinstance(data, Mapping):
        raise ProtocolError(
            "expected a JSON object",
            status=response.status_code,
            body=response.text[:512],
            request_id=request_id,
        )
    try:
        return reader.from_json(data, **extra)
    except (KeyError, TypeError, ValueError) as err:
        raise ProtocolError(
            f"unexpected answer shape ({type(err).__name__}: {err})",
            status=response.status_code,
            body=response.text[:512],
            request_id=request_id,
        ) from err


# --- the retry loop -----------------------------------------------------------


def exchange(
    call: HttpCall,
    policy: RetryPolicy,
    safety: Safety,
    *,
    request_id: str | None = None,
    deadline: float | None = None,
) -> Op[httpx.Response]:
    """Sends ``call`` until it succeeds (2xx), fails for good, or the policy
    (or ``deadline``, a ``time.monotonic()`` value) stops the retries.

    Raises :class:`ApiError` for an error answer and :class:`TransportError`
    for no answer; both carry ``request_id``.
    """
    started = time.monotonic()
    attempts = 0
    while True:
        attempts += 1
        reply = yield call
        failure: Exception
        if isinstance(reply, httpx.Response):
            if 200 <= reply.status_code <= 299:
                return reply
            error = error_from_answer(
                reply.status_code, reply.headers, reply.content, request_id=request_id
            )
            code = text(error.code) if error.code is not None else None
            retry = retryable_status(safety, reply.status_code, code)
            retry_after = error.retry_after
            failure = error
        elif isinstance(reply, httpx.TransportError):
            retry = retryable_transport(safety, reply)
            retry_after = None
            failure = TransportError(
                f"{call.method} {call.path}: {type(reply).__name__}: {reply}",
                request_id=request_id,
            )
            failure.__cause__ = reply
        else:  # pragma: no cover - a driver bug
            raise TypeError(f"driver answered {type(reply).__name__} to an HttpCall")
        if not retry:
            raise failure
        wait = policy.delay(attempts, retry_after)
        if not policy.allows(attempts, started, wait, deadline):
            raise failure
        yield Sleep(wait)


# --- operations -------------------------------------------------------------


def create(
    policy: RetryPolicy,
    *,
    submitter: str,
    request_id: str | None,
    chain_id: int | None,
    to: str | None,
    value: int | str | None,
    data: str | bytes | bytearray | memoryview | None,
    gas_limit: int | None,
    max_fee_per_gas: int | str | None,
    max_priority_fee_per_gas: int | str | None,
    private: bool | None,
    valid_until: datetime | str | None,
) -> Op[CreatedTransaction]:
    """``POST /v1/transactions``. The ``request_id`` (generated when ``None``)
    is in the body of every attempt, and every attempt sends the same bytes,
    so a retry after a lost answer is a replay (200), never a second intent.
    """
    rid = request_id if request_id is not None else new_request_id()
    if not 1 <= len(rid) <= MAX_REQUEST_ID_CHARS:
        raise ValueError(f"request_id must be 1 to {MAX_REQUEST_ID_CHARS} characters")
    body: dict[str, Any] = {"submitter": submitter, "request_id": rid}
    if chain_id is not None:
        body["chain_id"] = int(chain_id)
    if to is not None:
        body["to"] = to
    if value is not None:
        body["value"] = wei_text("value", value)
    if data is not None:
        body["data"] = data_text(data)
    if gas_limit is not None:
        if isinstance(gas_limit, bool) or not isinstance(gas_limit, int):
            raise TypeError("gas_limit must be an int")
        body["gas_limit"] = gas_limit
    if max_fee_per_gas is not None:
        body["max_fee_per_gas"] = wei_text("max_fee_per_gas", max_fee_per_gas)
    if max_priority_fee_per_gas is not None:
        body["max_priority_fee_per_gas"] = wei_text(
            "max_priority_fee_per_gas", max_priority_fee_per_gas
        )
    if private is not None:
        body["private"] = bool(private)
    if valid_until is not None:
        body["valid_until"] = rfc3339(valid_until)
    call = HttpCall("POST", "/v1/transactions", body=encode_json(body))
    response = yield from exchange(call, policy, Safety.IDEMPOTENT, request_id=rid)
    created: CreatedTransaction = parse(
        CreatedTransaction, response, rid, replayed=response.status_code == 200
    )
    return created


def get(
    policy: RetryPolicy, tx_id: str | uuid.UUID, *, deadline: float | None = None
) -> Op[Transaction]:
    """``GET /v1/transactions/{tx_id}``."""
    call = HttpCall("GET", f"/v1/transactions/{tx_id_text(tx_id)}")
    response = yield from exchange(call, policy, Safety.IDEMPOTENT, deadline=deadline)
    tx: Transaction = parse(Transaction, response)
    return tx


def get_by_request_id(
    policy: RetryPolicy, submitter: str, request_id: str, chain_id: int | None
) -> Op[Transaction]:
    """``GET /v1/transactions?submitter=..&request_id=..[&chain_id=..]``."""
    params = [("submitter", submitter), ("request_id", request_id)]
    params += chain_params(chain_id)
    call = HttpCall("GET", "/v1/transactions", params=params)
    response = yield from exchange(call, policy, Safety.IDEMPOTENT, request_id=request_id)
    tx: Transaction = parse(Transaction, response, request_id)
    return tx


def list_page(
    policy: RetryPolicy,
    submitter: str,
    *,
    chain_ids: Iterable[int] | int | None,
    state: TxState | str | None,
    limit: int | None,
    after: str | None,
) -> Op[TransactionPage]:
    """``GET /v1/transactions?submitter=..&state=..&limit=..&after=..``."""
    check_limit(limit, MAX_LIST_LIMIT)
    params = [("submitter", submitter)] + chain_params(chain_ids)
    if state is not None:
        params.append(("state", text(state)))
    if limit is not None:
        params.append(("limit", str(limit)))
    if after is not None:
        params.append(("after", after))
    call = HttpCall("GET", "/v1/transactions", params=params)
    response = yield from exchange(call, policy, Safety.IDEMPOTENT)
    page: TransactionPage = parse(TransactionPage, response)
    return page


#: The actions and how safe each is to repeat: a cancel is idempotent on the
#: server (a repeat answers 200 ``unchanged`` and never climbs the fees); a
#: speed-up, rebroadcast or requeue repeated could act twice.
ACTIONS: dict[str, Safety] = {
    "cancel": Safety.IDEMPOTENT,
    "speedup": Safety.UNSAFE,
    "rebroadcast": Safety.UNSAFE,
    "requeue": Safety.UNSAFE,
}


def action(
    policy: RetryPolicy, name: str, tx_id: str | uuid.UUID, reason: str | None
) -> Op[ActionResult]:
    """``POST /v1/transactions/{tx_id}/{name}`` with ``{"reason": ...}`` or
    ``{}``."""
    safety = ACTIONS[name]
    body: dict[str, Any] = {} if reason is None else {"reason": reason}
    call = HttpCall(
        "POST", f"/v1/transactions/{tx_id_text(tx_id)}/{name}", body=encode_json(body)
    )
    response = yield from exchange(call, policy, safety)
    result: ActionResult = parse(ActionResult, response)
    return result


def feed_page(
    policy: RetryPolicy,
    *,
    after: str | None,
    limit: int | None,
    wait: float,
    chain_ids: Iterable[int] | int | None,
    funds: bool,
    deadline: float | None = None,
) -> Op[FeedPage]:
    """``GET /v1/completions?after=..&limit=..&wait=..&chain_id=..&funds=..``.

    503 ``busy`` (too many long polls already wait on that node) is retried
    after ``Retry-After`` with the same cursor, as the README asks.
    """
    check_limit(limit, MAX_FEED_LIMIT)
    params = chain_params(chain_ids)
    if after is not None:
        params.append(("after", after))
    if limit is not None:
        params.append(("limit", str(limit)))
    wait = max(0.0, min(wait, MAX_FEED_WAIT))
    if wait > 0:
        params.append(("wait", duration_text(wait)))
    if funds:
        params.append(("funds", "true"))
    call = HttpCall("GET", "/v1/completions", params=params, extra_read_timeout=wait)
    response = yield from exchange(call, policy, Safety.IDEMPOTENT, deadline=deadline)
    page: FeedPage = parse(FeedPage, response)
    return page


def feed_end(policy: RetryPolicy) -> Op[str | None]:
    """``GET /v1/completions?after=end&limit=1``: the cursor at the feed's
    current end (after the last row every reader can see now), ``None``
    while the feed is empty — then reading from the beginning is the same.

    One request, whatever the feed holds. Should a row become visible
    between the server finding the end and reading after it, the page holds
    it and ``next_after`` is past it: still a position from which nothing
    completing later is missed.
    """
    page = yield from feed_page(
        policy, after=FEED_END, limit=1, wait=0.0, chain_ids=None, funds=False
    )
    return page.next_after


def next_cursor(sent: str | None, page: FeedPage) -> str | None:
    """The cursor to read from after ``page``, the answer to a request from
    ``sent``: its ``next_after``; when it has none, ``sent`` — except that
    ``"end"`` of an empty feed stands for its beginning, and asking for "the
    end" again could pass over a row that completed in between."""
    if page.next_after is not None:
        return page.next_after
    return None if sent == FEED_END else sent


def _deadline(timeout: float | None) -> float | None:
    if timeout is None:
        return None
    if timeout < 0:
        raise ValueError("timeout must not be negative")
    return time.monotonic() + timeout


def wait_one(
    policy: RetryPolicy, tx_id: str | uuid.UUID, timeout: float | None
) -> Op[Transaction]:
    """Polls ``GET /v1/transactions/{tx_id}`` with a growing pause (0.5 s
    doubling up to 5 s, jittered) until the state is final; raises
    :class:`WaitTimeout` (with the last read) when ``timeout`` seconds pass.
    """
    deadline = _deadline(timeout)
    key = tx_id_text(tx_id)
    polls = RetryPolicy(initial_backoff=POLL_INITIAL, max_backoff=POLL_MAX)
    retry_number = 0
    while True:
        tx = yield from get(policy, key, deadline=deadline)
        if tx.is_final:
            return tx
        retry_number += 1
        pause = polls.delay(retry_number)
        if deadline is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise WaitTimeout(frozenset({key}), last=tx)
            pause = min(pause, remaining)
        yield Sleep(pause)


def wait_many(
    policy: RetryPolicy,
    tx_ids: Iterable[str | uuid.UUID],
    timeout: float | None,
    *,
    after: str | None,
    chain_ids: Iterable[int] | int | None,
) -> Op[dict[str, Completion]]:
    """Reads the completion feed from ``after`` until every id's latest row is
    final, long-polling while nothing is new; one request at a time however
    many ids there are.

    A row per id is kept, the latest wins: STUCK and REORGED_OUT make an id
    pending again. Once every id is final the feed is read on without
    waiting until the cursor stops moving (its current end), so that a
    correction already in the feed is not missed when reading from an old
    cursor; if the deadline passes meanwhile, the finals are returned.

    ``after`` must be a cursor from before the intents could have become
    final (e.g. :func:`feed_end` taken before creating them): rows before it
    are not read. ``None`` reads from the oldest row the server keeps.
    """
    deadline = _deadline(timeout)
    wanted = {tx_id_text(tx_id) for tx_id in tx_ids}
    latest: dict[str, Completion] = {}
    cursor = after
    caught_up = False
    sent_once = False
    if not wanted:
        return {}
    while True:
        finals = {key: row for key, row in latest.items() if row.is_final}
        all_final = len(finals) == len(wanted)
        remaining = None if deadline is None else deadline - time.monotonic()
        # At least one read, even with timeout=0 (as for one id).
        out_of_time = sent_once and remaining is not None and remaining <= 0
        if all_final and (caught_up or out_of_time):
            return finals
        if out_of_time:
            raise WaitTimeout(frozenset(wanted - finals.keys()), results=finals, after=cursor)
        wait = 0.0 if all_final else DEFAULT_FEED_WAIT
        if remaining is not None:
            wait = max(0.0, min(wait, remaining))
        sent = cursor
        sent_once = True
        page = yield from feed_page(
            policy,
            after=sent,
            limit=MAX_FEED_LIMIT,
            wait=wait,
            chain_ids=chain_ids,
            funds=False,
            deadline=deadline,
        )
        for row in page.items:
            if row.tx_id is not None and row.tx_id in wanted:
                latest[row.tx_id] = row
        # The cursor moves whenever rows followed `sent`, shown or not; a
        # page that leaves it in place is the feed's current end.
        caught_up = page.next_after is None or page.next_after == sent
        cursor = next_cursor(sent, page)


class FollowerState:
    """The cursor bookkeeping of a feed follower, shared by the sync and
    async followers: the request for the next page, and the cursor after a
    page has been handed out."""

    def __init__(
        self,
        *,
        after: str | None,
        limit: int | None,
        wait: float,
        chain_ids: Iterable[int] | int | None,
        funds: bool,
        policy: RetryPolicy,
    ) -> None:
        check_limit(limit, MAX_FEED_LIMIT)
        if wait < 0:
            raise ValueError("wait must not be negative")
        self.cursor = after
        self.limit = limit
        self.wait = wait
        if isinstance(chain_ids, int):
            chain_ids = [chain_ids]
        self.chain_ids: list[int] | None = (
            None if chain_ids is None else [int(chain_id) for chain_id in chain_ids]
        )
        self.funds = funds
        self.policy = policy
        self.stopped = False

    def next_page(self) -> Op[FeedPage]:
        """The operation reading the page after the current cursor."""
        return feed_page(
            self.policy,
            after=self.cursor,
            limit=self.limit,
            wait=self.wait,
            chain_ids=self.chain_ids,
            funds=self.funds,
        )

    def advance(self, page: FeedPage) -> None:
        """Moves the cursor past ``page`` (its ``next_after``; from ``"end"``
        of an empty feed, to its beginning)."""
        self.cursor = next_cursor(self.cursor, page)
