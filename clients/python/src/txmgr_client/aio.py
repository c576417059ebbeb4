"""The asynchronous client, :class:`AsyncClient`.

The same operations as :class:`txmgr_client.Client`, from the same ``_core``
code (request building, parsing, retry decisions, waiting logic); only the
I/O differs: ``httpx.AsyncClient`` and ``asyncio.sleep``. Each method's
behaviour, arguments and errors are those of the sync method of the same
name.
"""

from __future__ import annotations

import asyncio
import ssl
import uuid
from collections.abc import AsyncIterator, Iterable
from datetime import datetime
from types import TracebackType
from typing import TYPE_CHECKING, overload

import httpx

from . import _core
from ._core import Op, Reply, T
from ._retry import RetryPolicy
from .client import DEFAULT_TIMEOUT, _timeout, ssl_context
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
    from .feed import AsyncFeedFollower

__all__ = ["AsyncClient"]


class AsyncClient:
    """An asyncio client of one txmgr node (or a load balancer).

    Example::

        async with AsyncClient("https://txmgr.internal:8443", token=TOKEN) as txmgr:
            created = await txmgr.create("0xf39f...", to="0x7099...", value=10**15)
            tx = await txmgr.wait_final(created.tx_id, timeout=300)

    Arguments as for :class:`txmgr_client.Client`; ``http_client`` is an
    ``httpx.AsyncClient``.
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
        http_client: httpx.AsyncClient | None = None,
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
            self._http = httpx.AsyncClient(
                base_url=base_url, verify=verify, timeout=_timeout(timeout)
            )
            self._owns_http = True

    # --- lifecycle -----------------------------------------------------------

    async def aclose(self) -> None:
        """Closes the connections (unless the ``httpx.AsyncClient`` was given)."""
        if self._owns_http:
            await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # --- the driver --------------------------------------------------------

    async def _send(self, call: _core.HttpCall) -> Reply:
        request = self._http.build_request(
            call.method,
            call.path,
            params=tuple(call.params) or None,
            content=call.body,
            headers=_core.headers_for(call, self._token),
            timeout=_core.timeout_for(self._http.timeout, call),
        )
        try:
            return await self._http.send(request)
        except httpx.TransportError as err:
            return err

    async def _run(self, op: Op[T]) -> T:
        """Runs a ``_core`` operation: sends its requests, sleeps its sleeps."""
        reply: Reply = None
        while True:
            try:
                effect = op.send(reply)
            except StopIteration as done:
                result: T = done.value
                return result
            if isinstance(effect, _core.Sleep):
                await asyncio.sleep(effect.seconds)
                reply = None
            else:
                reply = await self._send(effect)

    # --- create --------------------------------------------------------------

    async def create(
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
        """Creates an intent; see :meth:`txmgr_client.Client.create` (a
        ``request_id`` is always sent and reused by every retry)."""
        return await self._run(
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

    async def get(self, tx_id: str | uuid.UUID) -> Transaction:
        """Reads one transaction by id; see :meth:`txmgr_client.Client.get`."""
        return await self._run(_core.get(self.retry, tx_id))

    async def get_by_request_id(
        self, submitter: str, request_id: str, *, chain_id: int | None = None
    ) -> Transaction:
        """Reads the submitter's transaction with this ``request_id``; see
        :meth:`txmgr_client.Client.get_by_request_id`."""
        return await self._run(
            _core.get_by_request_id(self.retry, submitter, request_id, chain_id)
        )

    async def list_transactions(
        self,
        submitter: str,
        *,
        state: TxState | str | None = None,
        chain_ids: Iterable[int] | int | None = None,
        limit: int | None = None,
        after: str | None = None,
    ) -> TransactionPage:
        """One page of the submitter's transactions; see
        :meth:`txmgr_client.Client.list_transactions`."""
        return await self._run(
            _core.list_page(
                self.retry, submitter, chain_ids=chain_ids, state=state, limit=limit, after=after
            )
        )

    async def iter_transactions(
        self,
        submitter: str,
        *,
        state: TxState | str | None = None,
        chain_ids: Iterable[int] | int | None = None,
        page_size: int | None = None,
        after: str | None = None,
    ) -> AsyncIterator[Transaction]:
        """Every transaction of the submitter from ``after`` on, following
        ``next`` page by page."""
        cursor = after
        while True:
            page = await self.list_transactions(
                submitter, state=state, chain_ids=chain_ids, limit=page_size, after=cursor
            )
            for item in page.items:
                yield item
            if page.next is None:
                return
            cursor = page.next

    # --- actions ---------------------------------------------------------------

    async def cancel(self, tx_id: str | uuid.UUID, *, reason: str | None = None) -> ActionResult:
        """Cancels; see :meth:`txmgr_client.Client.cancel` (idempotent,
        retried like a read)."""
        return await self._run(_core.action(self.retry, "cancel", tx_id, reason))

    async def speed_up(
        self, tx_id: str | uuid.UUID, *, reason: str | None = None
    ) -> ActionResult:
        """Asks for a fee bump now; see :meth:`txmgr_client.Client.speed_up`
        (not idempotent: retried only when surely not acted on)."""
        return await self._run(_core.action(self.retry, "speedup", tx_id, reason))

    async def rebroadcast(
        self, tx_id: str | uuid.UUID, *, reason: str | None = None
    ) -> ActionResult:
        """Asks for a re-broadcast now; see
        :meth:`txmgr_client.Client.rebroadcast`."""
        return await self._run(_core.action(self.retry, "rebroadcast", tx_id, reason))

    async def requeue(
        self, tx_id: str | uuid.UUID, *, reason: str | None = None
    ) -> ActionResult:
        """Requeues an intent that lost its nonce; see
        :meth:`txmgr_client.Client.requeue`."""
        return await self._run(_core.action(self.retry, "requeue", tx_id, reason))

    # --- waiting -----------------------------------------------------------------

    @overload
    async def wait_final(  # type: ignore[overload-overlap, misc, unused-ignore]
        self,
        ids: str | uuid.UUID,
        timeout: float | None = None,
        *,
        after: str | None = None,
        chain_ids: Iterable[int] | int | None = None,
    ) -> Transaction: ...

    @overload
    async def wait_final(
        self,
        ids: Iterable[str | uuid.UUID],
        timeout: float | None = None,
        *,
        after: str | None = None,
        chain_ids: Iterable[int] | int | None = None,
    ) -> dict[str, Completion]: ...

    async def wait_final(
        self,
        ids: str | uuid.UUID | Iterable[str | uuid.UUID],
        timeout: float | None = None,
        *,
        after: str | None = None,
        chain_ids: Iterable[int] | int | None = None,
    ) -> Transaction | dict[str, Completion]:
        """Waits until final; see :meth:`txmgr_client.Client.wait_final` (one
        id: GETs with backoff; a collection: the completion feed from
        ``after``)."""
        if isinstance(ids, (str, uuid.UUID)):
            return await self._run(_core.wait_one(self.retry, ids, timeout))
        return await self._run(
            _core.wait_many(self.retry, ids, timeout, after=after, chain_ids=chain_ids)
        )

    # --- the completion feed -----------------------------------------------

    async def feed(
        self,
        after: str | None = None,
        *,
        limit: int | None = None,
        wait: float = 0.0,
        chain_ids: Iterable[int] | int | None = None,
        funds: bool = False,
    ) -> FeedPage:
        """One page of the completion feed; see
        :meth:`txmgr_client.Client.feed`."""
        return await self._run(
            _core.feed_page(
                self.retry, after=after, limit=limit, wait=wait, chain_ids=chain_ids, funds=funds
            )
        )

    async def feed_end(self) -> str | None:
        """The cursor at the feed's current end (``None`` while it is empty),
        one request; see :meth:`txmgr_client.Client.feed_end`."""
        return await self._run(_core.feed_end(self.retry))

    def follow(
        self,
        after: str | None = None,
        *,
        limit: int | None = None,
        wait: float = _core.DEFAULT_FEED_WAIT,
        chain_ids: Iterable[int] | int | None = None,
        funds: bool = False,
        retry: RetryPolicy | None = None,
    ) -> AsyncFeedFollower:
        """An :class:`~txmgr_client.feed.AsyncFeedFollower` from ``after``;
        see :meth:`txmgr_client.Client.follow`."""
        from .feed import AsyncFeedFollower

        return AsyncFeedFollower(
            self,
            after,
            limit=limit,
            wait=wait,
            chain_ids=chain_ids,
            funds=funds,
            retry=retry,
        )
