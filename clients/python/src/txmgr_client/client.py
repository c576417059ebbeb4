"""The synchronous client, :class:`Client`.

All request building, parsing, retry decisions and waiting logic are in
``_core`` and shared with :class:`txmgr_client.aio.AsyncClient`; this module
only sends requests with ``httpx.Client`` and sleeps with ``time.sleep``.
"""

from __future__ import annotations

import ssl
import time
import uuid
from collections.abc import Iterable, Iterator
from datetime import datetime
from types import TracebackType
from typing import TYPE_CHECKING, overload

import httpx

from . import _core
from ._core import Op, Reply, T
from ._retry import RetryPolicy
from .models import (
    ActionResult,
    Completion,
    CreatedTransaction,
    FeedPage,
    Transaction,
    TransactionPage,
    TxState,
)

if TYPE_CHECKING:
    from .feed import FeedFollower

__all__ = ["Client", "ssl_context"]

#: Default seconds for connecting, writing and reading one answer (a long
#: poll's ``wait`` is added to the read timeout).
DEFAULT_TIMEOUT = 30.0


def ssl_context(
    ca_file: str | None = None,
    client_cert: str | None = None,
    client_key: str | None = None,
) -> ssl.SSLContext:
    """The TLS context for a node behind a private CA (``ca_file``, PEM)
    and, for mutual TLS (``[http.tls] client_ca_file``), the client
    certificate and key (PEM). Without ``ca_file`` the system's roots are
    trusted."""
    context = ssl.create_default_context(cafile=ca_file)
    if client_cert is not None:
        context.load_cert_chain(client_cert, client_key)
    return context


def _timeout(timeout: float | httpx.Timeout) -> httpx.Timeout:
    return timeout if isinstance(timeout, httpx.Timeout) else httpx.Timeout(timeout)


class Client:
    """A synchronous client of one txmgr node (or a load balancer in front of
    several).

    Example::

        with Client("https://txmgr.internal:8443", token=TOKEN, ca_file="ca.pem") as txmgr:
            created = txmgr.create("0xf39f...", to="0x7099...", value=10**15,
                                   request_id="order-42")
            tx = txmgr.wait_final(created.tx_id, timeout=300)

    Args:
        base_url: The node's URL, e.g. ``https://txmgr.internal:8443``.
        token: The bearer token (``txmgr token new``); ``None`` for a
            tokenless node on loopback.
        ca_file: PEM file of the CA that signed the node's certificate.
        client_cert: PEM client certificate, for mutual TLS.
        client_key: PEM key of ``client_cert`` (if not in the same file).
        timeout: Seconds (or an ``httpx.Timeout``) per request.
        retry: The retry policy of every request (see :class:`RetryPolicy`).
        http_client: An ``httpx.Client`` to use instead of building one (its
            base URL, TLS and timeout are used; ``base_url``, ``ca_file``,
            ``client_cert`` and ``timeout`` are then ignored). It is not
            closed by :meth:`close`.
    """

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8080",
        *,
        token: str | None = None,
        ca_file: str | None = None,
        client_cert: str | None = None,
        client_key: str | None = None,
        timeout: float | httpx.Timeout = DEFAULT_TIMEOUT,
        retry: RetryPolicy | None = None,
        http_client: httpx.Client | None = None,
    ) -> None:
        self._token = token
        self.retry = retry or RetryPolicy()
        if http_client is not None:
            self._http = http_client
            self._owns_http = False
        else:
            verify: ssl.SSLContext | bool = True
            if ca_file is not None or client_cert is not None:
                verify = ssl_context(ca_file, client_cert, client_key)
            self._http = httpx.Client(
                base_url=base_url, verify=verify, timeout=_timeout(timeout)
            )
            self._owns_http = True

    # --- lifecycle -----------------------------------------------------------

    def close(self) -> None:
        """Closes the connections (unless the ``httpx.Client`` was given)."""
        if self._owns_http:
            self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # --- the driver --------------------------------------------------------

    def _send(self, call: _core.HttpCall) -> Reply:
        request = self._http.build_request(
            call.method,
            call.path,
            params=tuple(call.params) or None,
            content=call.body,
            headers=_core.headers_for(call, self._token),
            timeout=_core.timeout_for(self._http.timeout, call),
        )
        try:
            return self._http.send(request)
        except httpx.TransportError as err:
            return err

    def _run(self, op: Op[T]) -> T:
        """Runs a ``_core`` operation: sends its requests, sleeps its sleeps."""
        reply: Reply = None
        while True:
            try:
                effect = op.send(reply)
            except StopIteration as done:
                result: T = done.value
                return result
            if isinstance(effect, _core.Sleep):
                time.sleep(effect.seconds)
                reply = None
            else:
                reply = self._send(effect)

    # --- create --------------------------------------------------------------

    def create(
        self,
        submitter: str,
        *,
        to: str | None = None,
        value: int | str | None = None,
        data: str | bytes | None = None,
        request_id: str | None = None,
        chain_id: int | None = None,
        gas_limit: int | None = None,
        max_fee_per_gas: int | str | None = None,
        max_priority_fee_per_gas: int | str | None = None,
        private: bool | None = None,
        valid_until: datetime | str | None = None,
    ) -> CreatedTransaction:
        """Creates an intent (``POST /v1/transactions``); returns once the
        node has committed it.

        A ``request_id`` is always sent: pass your own key (an order id) to
        make the create idempotent across restarts of your process; without
        one a random UUID is generated for this call. Every retry (transport
        failures, 5xx, 429 — after ``Retry-After``) reuses it with the same
        body, so the intent is stored once. Other 4xx are raised at once.

        Args:
            submitter: The signing address (``0x`` hex).
            to: Recipient; ``None`` deploys a contract (``data`` = init code).
            value: Wei to send, an ``int`` or a decimal / ``0x`` hex string.
            data: Call data, ``0x`` hex or bytes.
            request_id: The idempotency key (1..256 characters, no control
                characters, not starting ``txmgr-`` or ``filler:``).
            chain_id: Required when the node serves several chains.
            gas_limit: Fixed gas limit (21000..1e9); absent = estimated.
            max_fee_per_gas: EIP-1559 fee cap in wei; absent = market price.
            max_priority_fee_per_gas: EIP-1559 tip in wei.
            private: Send only to the chain's send-only (private) endpoints.
            valid_until: Deadline (aware ``datetime`` or RFC 3339 string).

        Raises:
            ClientError: 4xx (``err.code``, ``err.field`` say why), e.g.
                ``invalid_request``, ``idempotency_conflict``, ``paused``.
            RateLimitedError: 429 still refused when the policy gave up.
            ServerError: 5xx still failing when the policy gave up.
            TransportError: no answer; ``err.request_id`` is the key to retry
                with.
        """
        return self._run(
            _core.create(
                self.retry,
                submitter=submitter,
                request_id=request_id,
                chain_id=chain_id,
                to=to,
                value=value,
                data=data,
                gas_limit=gas_limit,
                max_fee_per_gas=max_fee_per_gas,
                max_priority_fee_per_gas=max_priority_fee_per_gas,
                private=private,
                valid_until=valid_until,
            )
        )

    # --- reads -----------------------------------------------------------------

    def get(self, tx_id: str | uuid.UUID) -> Transaction:
        """Reads one transaction by id (``GET /v1/transactions/{tx_id}``).

        Raises:
            NotFoundError: ``not_found``, or ``aged_out`` (older than the
                history retention).
        """
        return self._run(_core.get(self.retry, tx_id))

    def get_by_request_id(
        self, submitter: str, request_id: str, *, chain_id: int | None = None
    ) -> Transaction:
        """Reads the submitter's transaction with this ``request_id``
        (``chain_id`` required when the node serves several chains).

        Raises:
            NotFoundError: no transaction with this ``request_id``.
        """
        return self._run(_core.get_by_request_id(self.retry, submitter, request_id, chain_id))

    def list_transactions(
        self,
        submitter: str,
        *,
        state: TxState | str | None = None,
        chain_ids: Iterable[int] | int | None = None,
        limit: int | None = None,
        after: str | None = None,
    ) -> TransactionPage:
        """One page of the submitter's transactions in acceptance order
        (``limit`` 1..500, default 50). Pass ``page.next`` as ``after`` for the
        next page; a page may be short while ``next`` is set."""
        return self._run(
            _core.list_page(
                self.retry, submitter, chain_ids=chain_ids, state=state, limit=limit, after=after
            )
        )

    def iter_transactions(
        self,
        submitter: str,
        *,
        state: TxState | str | None = None,
        chain_ids: Iterable[int] | int | None = None,
        page_size: int | None = None,
        after: str | None = None,
    ) -> Iterator[Transaction]:
        """Every transaction of the submitter from ``after`` on, following
        ``next`` page by page."""
        cursor = after
        while True:
            page = self.list_transactions(
                submitter, state=state, chain_ids=chain_ids, limit=page_size, after=cursor
            )
            yield from page.items
            if page.next is None:
                return
            cursor = page.next

    # --- actions ---------------------------------------------------------------

    def cancel(self, tx_id: str | uuid.UUID, *, reason: str | None = None) -> ActionResult:
        """Cancels: at once when QUEUED (``status`` ``done``); otherwise the
        leader replaces it by a 0-value self-transfer (``requested``). A cancel
        of an intent already being cancelled answers ``unchanged``, so it is
        retried like a read. One exception: when a lost answer had cancelled
        a QUEUED intent at once, the retry finds it final and raises
        ``invalid_state``; read it with :meth:`get` (CANCELLED) to tell.

        Raises:
            ConflictError: ``invalid_state`` (final, mined) or
                ``chain_not_served``.
            RateLimitedError: ``rate_limited`` (client token: a cancel
                carried out on this intent within its resubmit interval).
        """
        return self._run(_core.action(self.retry, "cancel", tx_id, reason))

    def speed_up(self, tx_id: str | uuid.UUID, *, reason: str | None = None) -> ActionResult:
        """Asks the leader to sign a fee bump now (ALLOCATED, TRACKING or
        STUCK, not mined). Not idempotent: retried only when the request
        surely was not acted on (connect failure, 503 ``busy``).

        Raises:
            ConflictError: ``invalid_state``.
            RateLimitedError: ``rate_limited`` — asked again within the
                submitter's ``resubmit_interval`` (``retry_after`` says when).
        """
        return self._run(_core.action(self.retry, "speedup", tx_id, reason))

    def rebroadcast(self, tx_id: str | uuid.UUID, *, reason: str | None = None) -> ActionResult:
        """Asks the leader to re-send the newest attempt's bytes now. Retried
        like :meth:`speed_up`."""
        return self._run(_core.action(self.retry, "rebroadcast", tx_id, reason))

    def requeue(self, tx_id: str | uuid.UUID, *, reason: str | None = None) -> ActionResult:
        """Sends again, with a fresh nonce, an intent whose nonce a foreign
        transaction consumed (STUCK, ``nonce_consumed_externally``). Retried
        like :meth:`speed_up`."""
        return self._run(_core.action(self.retry, "requeue", tx_id, reason))

    # --- waiting -----------------------------------------------------------------

    @overload
    def wait_final(  # type: ignore[overload-overlap, misc, unused-ignore]
        self,
        ids: str | uuid.UUID,
        timeout: float | None = None,
        *,
        after: str | None = None,
        chain_ids: Iterable[int] | int | None = None,
    ) -> Transaction: ...

    @overload
    def wait_final(
        self,
        ids: Iterable[str | uuid.UUID],
        timeout: float | None = None,
        *,
        after: str | None = None,
        chain_ids: Iterable[int] | int | None = None,
    ) -> dict[str, Completion]: ...

    def wait_final(
        self,
        ids: str | uuid.UUID | Iterable[str | uuid.UUID],
        timeout: float | None = None,
        *,
        after: str | None = None,
        chain_ids: Iterable[int] | int | None = None,
    ) -> Transaction | dict[str, Completion]:
        """Waits until the transaction(s) reach a final state (CONFIRMED,
        FAILED_FINAL, REJECTED, CANCELLED).

        - One id (a ``str`` or ``UUID``): polls ``GET /v1/transactions/{id}``
          with a growing pause (0.5 s to 5 s) and returns the
          :class:`Transaction`.
        - A collection of ids: reads the completion feed from ``after`` —
          one long-polling request at a time, not a GET per id — and returns
          ``{tx_id: Completion}``. ``after`` must be a feed cursor from before
          the intents could have become final (e.g. :meth:`feed_end` or your
          follower's stored cursor, taken before creating them); ``None``
          reads from the oldest row the server keeps, which can be long.
          ``chain_ids`` narrows the rows read.

        Args:
            timeout: Seconds; ``None`` waits for ever.

        Raises:
            WaitTimeout: not final in time (``pending``; ``last`` or
                ``results`` and ``after`` to resume).
        """
        if isinstance(ids, (str, uuid.UUID)):
            return self._run(_core.wait_one(self.retry, ids, timeout))
        return self._run(
            _core.wait_many(self.retry, ids, timeout, after=after, chain_ids=chain_ids)
        )

    # --- the completion feed -----------------------------------------------

    def feed(
        self,
        after: str | None = None,
        *,
        limit: int | None = None,
        wait: float = 0.0,
        chain_ids: Iterable[int] | int | None = None,
        funds: bool = False,
    ) -> FeedPage:
        """One page of the completion feed after ``after`` (``None`` = from
        the beginning; ``"end"`` = after the feed's current end, which the
        page's ``next_after`` then is — ``None`` while the feed is empty; see
        :meth:`feed_end`). With ``wait`` > 0 the server holds the request up to
        that many seconds (at most 60, and 90 % of its request timeout) when
        nothing is new. Store ``page.next_after`` with whatever you did with
        the rows and pass it back next time."""
        return self._run(
            _core.feed_page(
                self.retry, after=after, limit=limit, wait=wait, chain_ids=chain_ids, funds=funds
            )
        )

    def feed_end(self) -> str | None:
        """The feed's current end (``GET /v1/completions?after=end&limit=1``):
        the cursor after the last row every reader can see now, ``None``
        while the feed is empty (then reading from the beginning is the
        same). One request, retried like a read.

        Take it *before* creating the intents you will wait for with
        ``wait_final([...], after=...)``, or to follow only what completes
        from now on::

            after = txmgr.feed_end()
            ids = [txmgr.create(submitter, to=to, value=v).tx_id for to, v in payouts]
            rows = txmgr.wait_final(ids, timeout=300, after=after)
        """
        return self._run(_core.feed_end(self.retry))

    def follow(
        self,
        after: str | None = None,
        *,
        limit: int | None = None,
        wait: float = _core.DEFAULT_FEED_WAIT,
        chain_ids: Iterable[int] | int | None = None,
        funds: bool = False,
        retry: RetryPolicy | None = None,
    ) -> FeedFollower:
        """A :class:`~txmgr_client.feed.FeedFollower` from ``after`` (your
        stored cursor; ``"end"`` to follow only what completes from now on):
        iterate it for pages, store each page's ``next_after`` with your own
        data. Transient failures are retried for
        ever (``RetryPolicy.forever()``) unless ``retry`` says otherwise."""
        from .feed import FeedFollower

        return FeedFollower(
            self,
            after,
            limit=limit,
            wait=wait,
            chain_ids=chain_ids,
            funds=funds,
            retry=retry,
        )
