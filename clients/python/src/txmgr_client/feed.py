"""Followers of the completion feed (``GET /v1/completions``).

A follower reads the feed page by page from a cursor you stored, long-polling
when nothing is new, and hands you each page; after a page, its
``next_after`` is the cursor to store — in the same transaction as whatever
you did with the rows, so that after a crash you resume exactly where your
data says, without a gap and without a repeat::

    follower = txmgr.follow(after=load_cursor())
    for page in follower:
        with db.transaction():
            for row in page.items:
                handle(row)
            save_cursor(page.next_after)

Every page is handed out, empty ones too: an empty page's ``next_after`` may
have moved past rows you may not see (other chains, other submitters' rows,
funds events), and the loop gets a chance to stop (:meth:`FeedFollower.stop`).
Transient failures (no answer, 5xx, 503 ``busy`` of a node with too many
long polls) are retried with the follower's policy — by default for ever,
with backoff capped at 30 s — and the same cursor; a 4xx (a bad cursor, a
revoked token) is raised.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from typing import TYPE_CHECKING

from ._core import FollowerState
from ._retry import RetryPolicy
from .models import FeedPage

if TYPE_CHECKING:
    from .aio import AsyncClient
    from .client import Client

__all__ = ["AsyncFeedFollower", "FeedFollower"]


class FeedFollower:
    """Iterates pages of the completion feed from a cursor (sync).

    Args:
        client: The :class:`~txmgr_client.Client` to read with.
        after: The stored cursor (``next_after`` of the last page handled);
            ``None`` starts from the oldest row the server keeps; ``"end"``
            after the feed's current end (only what completes from now on:
            the first page's ``next_after`` is that position, to store).
        limit: Rows per page (1..1000; server default 100).
        wait: Long poll in seconds when nothing is new (the server caps it at
            60 s and 90 % of its request timeout).
        chain_ids: Only these chains' rows (the cursor still covers every
            chain).
        funds: Also the funds events LOW_BALANCE / BALANCE_RESTORED.
        retry: Retry policy of each page read; default
            ``RetryPolicy.forever()``.
    """

    def __init__(
        self,
        client: Client,
        after: str | None = None,
        *,
        limit: int | None = None,
        wait: float = 30.0,
        chain_ids: Iterable[int] | int | None = None,
        funds: bool = False,
        retry: RetryPolicy | None = None,
    ) -> None:
        self._client = client
        self._state = FollowerState(
            after=after,
            limit=limit,
            wait=wait,
            chain_ids=chain_ids,
            funds=funds,
            policy=retry or RetryPolicy.forever(),
        )

    @property
    def cursor(self) -> str | None:
        """The cursor after the last page handed out (what to store), or the
        starting ``after`` before the first."""
        return self._state.cursor

    def stop(self) -> None:
        """Ends the iteration before the next page is read (call it from
        the loop body or from another thread)."""
        self._state.stopped = True

    def __iter__(self) -> Iterator[FeedPage]:
        while not self._state.stopped:
            page = self._client._run(self._state.next_page())
            self._state.advance(page)
            yield page

    def run(self, handle: Callable[[FeedPage], object]) -> None:
        """Calls ``handle(page)`` for every page until :meth:`stop`; the
        handler stores ``page.next_after`` with its own data. An exception
        from the handler ends the run (the page it failed on is read again
        by a follower started from the cursor the handler stored last)."""
        for page in self:
            handle(page)


class AsyncFeedFollower:
    """Iterates pages of the completion feed from a cursor (asyncio); the
    same arguments and behaviour as :class:`FeedFollower`."""

    def __init__(
        self,
        client: AsyncClient,
        after: str | None = None,
        *,
        limit: int | None = None,
        wait: float = 30.0,
        chain_ids: Iterable[int] | int | None = None,
        funds: bool = False,
        retry: RetryPolicy | None = None,
    ) -> None:
        self._client = client
        self._state = FollowerState(
            after=after,
            limit=limit,
            wait=wait,
            chain_ids=chain_ids,
            funds=funds,
            policy=retry or RetryPolicy.forever(),
        )

    @property
    def cursor(self) -> str | None:
        """The cursor after the last page handed out (what to store), or the
        starting ``after`` before the first."""
        return self._state.cursor

    def stop(self) -> None:
        """Ends the iteration before the next page is read."""
        self._state.stopped = True

    async def __aiter__(self) -> AsyncIterator[FeedPage]:
        while not self._state.stopped:
            page = await self._client._run(self._state.next_page())
            self._state.advance(page)
            yield page

    async def run(self, handle: Callable[[FeedPage], Awaitable[object]]) -> None:
        """Awaits ``handle(page)`` for every page until :meth:`stop`; the
        handler stores ``page.next_after`` with its own data."""
        async for page in self:
            await handle(page)
