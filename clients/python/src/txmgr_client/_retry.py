"""The retry policy shared by the sync and async clients.

Pure decisions, no I/O: *whether* an outcome may be retried (it depends on
whether repeating the request can do the work twice) and *how long* to wait
first (exponential backoff with jitter, capped, never shorter than the
server's ``Retry-After``). The drivers in ``client.py`` and ``aio.py`` only
sleep for what this module says.
"""

from __future__ import annotations

import email.utils
import enum
import random
import re
import time
from dataclasses import dataclass

import httpx

__all__ = ["RetryPolicy", "Safety", "parse_retry_after"]

_DIGITS = re.compile(r"[0-9]+")


class Safety(enum.Enum):
    """How safe it is to send a request again when its outcome is unknown."""

    #: Repeating it cannot do the work twice: every GET, a create (its
    #: ``request_id`` makes a replay answer the stored intent) and a cancel
    #: (a repeated cancel answers 200 ``unchanged``). Transport failures,
    #: 5xx and 429 are retried.
    IDEMPOTENT = "idempotent"
    #: Repeating it may act twice (a speed-up bumps the fees again, a
    #: rebroadcast or requeue runs again). Retried only when the request is
    #: known not to have been acted on: it never reached the server (connect
    #: failure), or the server said 503 ``busy`` ("nothing was done").
    UNSAFE = "unsafe"


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to retry a request that failed transiently.

    The wait before retry number ``n`` (1 for the first retry) is
    ``min(max_backoff, initial_backoff * multiplier ** (n - 1))`` with
    "equal jitter" (a uniformly random point in its upper half). When the
    answer carried ``Retry-After``, the wait is that many seconds plus up to
    10 % (so clients told the same value do not come back in lock step); if
    that wait does not fit in what is left of ``max_elapsed`` (or of the
    caller's own deadline), the error is raised at once instead, carrying
    ``retry_after``.

    Attributes:
        max_attempts: Attempts in all, the first included; ``None`` = no limit.
        max_elapsed: Seconds from the first attempt after which no retry
            starts; ``None`` = no limit.
        initial_backoff: Seconds before the first retry (before jitter).
        max_backoff: Cap of the exponential wait (before jitter).
        multiplier: Growth of the wait per retry.
    """

    max_attempts: int | None = 10
    max_elapsed: float | None = 60.0
    initial_backoff: float = 0.25
    max_backoff: float = 8.0
    multiplier: float = 2.0

    @classmethod
    def forever(cls, *, max_backoff: float = 30.0) -> RetryPolicy:
        """A policy that never gives up on a transient failure (for feed
        followers and other long-running loops); the wait is capped at
        ``max_backoff`` seconds."""
        return cls(max_attempts=None, max_elapsed=None, max_backoff=max_backoff)

    @classmethod
    def never(cls) -> RetryPolicy:
        """A policy that sends every request exactly once."""
        return cls(max_attempts=1, max_elapsed=0.0)

    def delay(
        self,
        retry_number: int,
        retry_after: float | None = None,
        rng: random.Random | None = None,
    ) -> float:
        """Seconds to wait before retry number ``retry_number`` (1-based).

        Args:
            retry_number: 1 before the first retry, 2 before the second, ...
            retry_after: The server's ``Retry-After`` in seconds, if any.
            rng: Source of jitter (tests pass a seeded one).
        """
        draw = (rng or random).random()
        if retry_after is not None:
            return retry_after * (1.0 + 0.1 * draw)
        exponent = max(0, retry_number - 1)
        # Avoid float overflow for very long-running loops.
        base = self.initial_backoff * (self.multiplier ** min(exponent, 64))
        capped = min(self.max_backoff, base)
        return capped / 2.0 + (capped / 2.0) * draw

    def allows(
        self,
        attempts_made: int,
        started: float,
        wait: float,
        deadline: float | None = None,
        now: float | None = None,
    ) -> bool:
        """Whether another attempt may start after waiting ``wait`` seconds.

        Args:
            attempts_made: Attempts already sent.
            started: ``time.monotonic()`` of the first attempt.
            wait: The wait planned before the next attempt.
            deadline: The caller's own ``time.monotonic()`` deadline, if any.
            now: The current ``time.monotonic()`` (read when omitted).
        """
        if self.max_attempts is not None and attempts_made >= self.max_attempts:
            return False
        current = time.monotonic() if now is None else now
        resume = current + wait
        if self.max_elapsed is not None and resume - started > self.max_elapsed:
            return False
        if deadline is not None and resume > deadline:
            return False
        return True


def retryable_status(safety: Safety, status: int, code: str | None) -> bool:
    """Whether an error answer may be retried under ``safety``.

    Idempotent requests: 429 and every 5xx. Unsafe ones: only 503 ``busy``
    (the node refused before doing anything). Other 4xx never.
    """
    if safety is Safety.IDEMPOTENT:
        return status == 429 or 500 <= status <= 599
    return status == 503 and code == "busy"


def retryable_transport(safety: Safety, error: httpx.TransportError) -> bool:
    """Whether a transport failure may be retried under ``safety``.

    Idempotent requests: timeouts, network errors and a server that closed
    the connection without answering (a daemon killed mid-request). Unsafe
    ones: only failures before the request was sent (connect errors, connect
    and pool timeouts). Configuration problems (unsupported scheme, proxy
    misconfiguration, local protocol errors) never.
    """
    not_sent = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
    if isinstance(error, not_sent):
        return True
    if safety is Safety.UNSAFE:
        return False
    return isinstance(
        error, (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError)
    )


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Reads a ``Retry-After`` header: whole seconds (what txmgr sends) or an
    HTTP date (what a proxy may send). ``None`` when absent or unreadable;
    never negative.
    """
    if value is None:
        return None
    text = value.strip()
    if _DIGITS.fullmatch(text):
        return float(int(text))
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None or when.tzinfo is None:
        return None
    current = time.time() if now is None else now
    return max(0.0, when.timestamp() - current)
