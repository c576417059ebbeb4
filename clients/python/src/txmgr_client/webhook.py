"""Verifying txmgr's webhook deliveries (README "Webhooks").

Each delivery is a ``POST`` with::

    x-txmgr-signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<raw body>")>
    x-txmgr-delivery:  <webhook>:<cursor>   (the same on every attempt: dedup on it)
    x-txmgr-attempt:   1, 2, ...
    x-txmgr-event:     CONFIRMED | FAILED_FINAL | ... | LOW_BALANCE | ...

Verify the **raw body bytes**, before parsing the JSON: a re-serialised body
does not carry the same bytes. A timestamp further than ``tolerance`` seconds
from now (either way) is refused, which also refuses replays.

The header is read exactly as ``actors/src/webhook/signature.rs`` ``verify``
reads it: split on ``,``; each part split at its first ``=``; the keys ``t``
and ``v1`` matched exactly (no whitespace is trimmed); when a key repeats,
the last one counts; other parts are ignored. ``t`` must be written as the
sender writes it — ASCII decimal digits, no sign, no leading zero, at most
2^64-1 — or it counts as absent (``+1700000000`` or ``01700000000`` are
texts the sender never signs); ``v1`` is compared, in constant time
(``hmac.compare_digest``), with the lower-case hex MAC.

During a secret rotation (a ``secret_file`` rewritten, then SIGHUP) pass
both secrets: a delivery signed with either is accepted.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import json
import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Union

from .errors import TxmgrError
from .models import WebhookEvent

__all__ = [
    "ATTEMPT_HEADER",
    "DEFAULT_TOLERANCE",
    "DELIVERY_HEADER",
    "EVENT_HEADER",
    "SIGNATURE_HEADER",
    "VerificationFailure",
    "WebhookDelivery",
    "WebhookVerificationError",
    "sign",
    "verify",
    "verify_request",
]

#: The header carrying the signature.
SIGNATURE_HEADER = "x-txmgr-signature"
#: The header carrying the delivery id (``<webhook>:<cursor>``).
DELIVERY_HEADER = "x-txmgr-delivery"
#: The header carrying the attempt number (1 for the first).
ATTEMPT_HEADER = "x-txmgr-attempt"
#: The header carrying the event name.
EVENT_HEADER = "x-txmgr-event"
#: Default tolerance between the signature's time and now, in seconds.
DEFAULT_TOLERANCE = 300

_DIGITS = re.compile(r"[0-9]+")
#: ``t`` as the sender writes it: ``0``, or digits without a leading zero.
_CANONICAL_SECONDS = re.compile(r"0|[1-9][0-9]*")
_U64_MAX = 2**64 - 1

#: A secret: bytes, or text (UTF-8 encoded).
Secret = Union[bytes, bytearray, str]


class VerificationFailure(str, enum.Enum):
    """Why a delivery was refused; the values are the TypeScript client's
    ``WebhookRefusal`` names (``clients/typescript/src/webhook.ts``)."""

    def __str__(self) -> str:
        return str(self.value)

    #: No ``x-txmgr-signature`` header.
    MISSING_SIGNATURE = "missing_signature"
    #: The header lacks a canonical ``t=`` (decimal, no sign, no leading
    #: zero) or a ``v1=``.
    MALFORMED_SIGNATURE = "malformed_signature"
    #: ``t`` is further from now than the tolerance (old: a replay, or a
    #: clock off).
    STALE_TIMESTAMP = "stale_timestamp"
    #: No secret gives this MAC over this body: another secret, or a body
    #: changed (or re-serialised) on the way.
    BAD_SIGNATURE = "bad_signature"
    #: The signature holds but the body is not a delivery this client can
    #: read (only from :func:`verify_request`).
    BAD_BODY = "bad_body"


class WebhookVerificationError(TxmgrError):
    """A delivery failed verification; answer it with 4xx (txmgr does not
    retry a 4xx: it dead-letters the event, which an operator can redeliver).

    Attributes:
        reason: Which check failed.
    """

    reason: VerificationFailure

    def __init__(self, reason: VerificationFailure, message: str) -> None:
        super().__init__(f"{reason.value}: {message}")
        self.reason = reason


@dataclass(frozen=True)
class WebhookDelivery:
    """A verified delivery."""

    #: ``x-txmgr-delivery``: the same on every attempt of one event.
    delivery_id: str | None
    #: ``x-txmgr-attempt`` (1 for the first), when present.
    attempt: int | None
    #: ``x-txmgr-event``, when present.
    event_name: str | None
    #: The signature's time (unix seconds).
    timestamp: int
    #: The parsed body.
    event: WebhookEvent


def _secrets(secret: Secret | Iterable[Secret]) -> list[bytes]:
    if isinstance(secret, (bytes, bytearray)):
        keys = [bytes(secret)]
    elif isinstance(secret, str):
        keys = [secret.encode("utf-8")]
    else:
        keys = [
            bytes(item) if isinstance(item, (bytes, bytearray)) else str(item).encode("utf-8")
            for item in secret
        ]
    if not keys:
        raise ValueError("at least one secret is needed")
    return keys


def _raw(body: bytes | bytearray | memoryview) -> bytes:
    if isinstance(body, str):
        raise TypeError("pass the raw body bytes as received, not text")
    return bytes(body)


def _canonical_seconds(text: str) -> int | None:
    """``t`` as ``signature.rs`` ``canonical_seconds`` reads it: a u64 written
    canonically (ASCII digits, no sign, no leading zero), else ``None``."""
    if not _CANONICAL_SECONDS.fullmatch(text):
        return None
    seconds = int(text)
    return seconds if seconds <= _U64_MAX else None


def _mac(secret: bytes, timestamp: int, body: bytes) -> str:
    return hmac.new(secret, f"{timestamp}.".encode("ascii") + body, hashlib.sha256).hexdigest()


def sign(secret: Secret, timestamp: int, body: bytes) -> str:
    """The ``x-txmgr-signature`` value txmgr would send for ``body`` at
    ``timestamp`` (for tests of a receiver)."""
    return f"t={timestamp},v1={_mac(_secrets(secret)[0], timestamp, _raw(body))}"


def verify(
    header: str | bytes | None,
    body: bytes | bytearray | memoryview,
    secret: Secret | Iterable[Secret],
    *,
    tolerance: int = DEFAULT_TOLERANCE,
    now: float | None = None,
) -> int:
    """Verifies one ``x-txmgr-signature`` value over the raw ``body``.

    Args:
        header: The header's value (``None`` when absent).
        body: The raw request body, exactly as received.
        secret: The webhook's secret, or several (rotation).
        tolerance: Largest distance in seconds between ``t`` and now.
        now: Unix time to check against (default: the clock).

    Returns:
        The signature's timestamp.

    Raises:
        WebhookVerificationError: with the ``reason``.
    """
    raw = _raw(body)
    keys = _secrets(secret)
    if header is None:
        raise WebhookVerificationError(
            VerificationFailure.MISSING_SIGNATURE, f"no {SIGNATURE_HEADER} header"
        )
    value = header.decode("latin-1") if isinstance(header, bytes) else header
    timestamp: int | None = None
    signature: str | None = None
    for part in value.split(","):
        key, sep, item = part.partition("=")
        if not sep:
            continue
        if key == "t":
            timestamp = _canonical_seconds(item)
        elif key == "v1":
            signature = item
    if timestamp is None or signature is None:
        raise WebhookVerificationError(
            VerificationFailure.MALFORMED_SIGNATURE,
            f"{SIGNATURE_HEADER} lacks a canonical t=<unix seconds> or a v1=<hex HMAC-SHA256>",
        )
    current = int(time.time() if now is None else now)
    if abs(current - timestamp) > tolerance:
        raise WebhookVerificationError(
            VerificationFailure.STALE_TIMESTAMP,
            f"signed at {timestamp}, now {current}: more than {tolerance} s apart",
        )
    given = signature.encode("utf-8", errors="replace")
    matched = False
    # Every secret is tried (no early exit), each comparison in constant time.
    for key_bytes in keys:
        expected = _mac(key_bytes, timestamp, raw).encode("ascii")
        matched |= hmac.compare_digest(expected, given)
    if not matched:
        raise WebhookVerificationError(
            VerificationFailure.BAD_SIGNATURE, "the signature does not match the body"
        )
    return timestamp


def _header(headers: Mapping[str, Any], name: str) -> str | None:
    value: Any = headers.get(name)
    if value is None:
        for key, item in headers.items():
            if str(key).lower() == name:
                value = item
                break
    if value is None:
        return None
    if isinstance(value, bytes):
        return value.decode("latin-1")
    if isinstance(value, (list, tuple)):
        return str(value[0]) if value else None
    return str(value)


def verify_request(
    headers: Mapping[str, Any],
    body: bytes | bytearray | memoryview,
    secret: Secret | Iterable[Secret],
    *,
    tolerance: int = DEFAULT_TOLERANCE,
    now: float | None = None,
) -> WebhookDelivery:
    """Verifies a delivery from its headers (any mapping; names matched
    case-insensitively) and raw body, then parses the body.

    Raises:
        WebhookVerificationError: with the ``reason``.
    """
    raw = _raw(body)
    timestamp = verify(
        _header(headers, SIGNATURE_HEADER), raw, secret, tolerance=tolerance, now=now
    )
    try:
        data = json.loads(raw)
        if not isinstance(data, Mapping):
            raise ValueError("not a JSON object")
        event = WebhookEvent.from_json(data)
    except (KeyError, TypeError, ValueError) as err:
        raise WebhookVerificationError(
            VerificationFailure.BAD_BODY, f"{type(err).__name__}: {err}"
        ) from err
    attempt_text = _header(headers, ATTEMPT_HEADER)
    attempt = int(attempt_text) if attempt_text and _DIGITS.fullmatch(attempt_text) else None
    return WebhookDelivery(
        delivery_id=_header(headers, DELIVERY_HEADER),
        attempt=attempt,
        event_name=_header(headers, EVENT_HEADER),
        timestamp=timestamp,
        event=event,
    )
