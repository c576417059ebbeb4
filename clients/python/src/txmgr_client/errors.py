"""Errors raised by the client.

Every error answer of txmgr is ``{"error": {"code", "message", "field"?,
"rule"?, "owner"?, "issues"?, "tx_id"?}}`` with a stable machine ``code``
(``src/http/error_body.rs``). It is raised as an :class:`ApiError` (or one
of its subclasses, chosen by status) carrying the HTTP status, the code as
an :class:`ErrorCode` (a plain ``str`` for a code this version does not
know), the ``field`` at fault, the message and ``Retry-After``.

Hierarchy::

    TxmgrError
    ├── ApiError                  the server answered with an error status
    │   ├── ClientError           4xx
    │   │   ├── NotFoundError     404 not_found / aged_out
    │   │   ├── ConflictError     409 idempotency_conflict / invalid_state / ...
    │   │   └── RateLimitedError  429 overloaded / rate_limited
    │   └── ServerError           5xx
    │       └── UnavailableError  503 unavailable / busy
    ├── TransportError            no answer (connection refused, timeout, ...)
    ├── ProtocolError             an answer this client cannot read
    └── WaitTimeout               wait_final ran out of time
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._retry import parse_retry_after

if TYPE_CHECKING:
    from .models import Completion, Transaction

__all__ = [
    "ApiError",
    "ClientError",
    "ConflictError",
    "ErrorCode",
    "ErrorIssue",
    "NotFoundError",
    "ProtocolError",
    "RateLimitedError",
    "ServerError",
    "TransportError",
    "TxmgrError",
    "UnavailableError",
    "WaitTimeout",
]


class ErrorCode(str, enum.Enum):
    """The machine codes of txmgr's errors (``ERROR_CODES`` in
    ``src/http/error_body.rs``). Members compare equal to their string, so
    ``err.code == "invalid_request"`` and ``err.code is
    ErrorCode.INVALID_REQUEST`` both work."""

    def __str__(self) -> str:
        return str(self.value)

    INVALID_REQUEST = "invalid_request"
    MISSING_FIELD = "missing_field"
    UNAUTHORIZED = "unauthorized"
    FORBIDDEN = "forbidden"
    POLICY_VIOLATION = "policy_violation"
    NOT_FOUND = "not_found"
    AGED_OUT = "aged_out"
    METHOD_NOT_ALLOWED = "method_not_allowed"
    IDEMPOTENCY_CONFLICT = "idempotency_conflict"
    INVALID_STATE = "invalid_state"
    NOT_LEADER = "not_leader"
    CHAIN_NOT_SERVED = "chain_not_served"
    PAYLOAD_TOO_LARGE = "payload_too_large"
    UNSUPPORTED_MEDIA_TYPE = "unsupported_media_type"
    MISDIRECTED_REQUEST = "misdirected_request"
    UNKNOWN_SUBMITTER = "unknown_submitter"
    SUBMITTER_PROTECTED = "submitter_protected"
    PAUSED = "paused"
    OVERLOADED = "overloaded"
    RATE_LIMITED = "rate_limited"
    INVALID_CONFIG = "invalid_config"
    INTERNAL = "internal"
    UNAVAILABLE = "unavailable"
    BUSY = "busy"


_KNOWN_CODES = {member.value: member for member in ErrorCode}


@dataclass(frozen=True)
class ErrorIssue:
    """One problem of a rejected configuration (``invalid_config`` only)."""

    #: Dotted key path.
    key: str
    #: What is wrong with it.
    reason: str


class TxmgrError(Exception):
    """Base of every error this package raises.

    Attributes:
        request_id: The ``request_id`` of the create that failed, so the
            caller can retry it later under the same key (``None`` for
            other requests).
    """

    request_id: str | None

    def __init__(self, message: str, *, request_id: str | None = None) -> None:
        super().__init__(message)
        self.request_id = request_id


class ApiError(TxmgrError):
    """The server answered with an error status.

    Attributes:
        status: The HTTP status.
        code: The machine code (an :class:`ErrorCode`; a plain ``str`` for a
            code this version does not know; ``None`` when the body was not
            txmgr's error shape, e.g. a proxy's page).
        message: The server's message, for humans (it may change between
            versions: branch on ``code`` and ``field``).
        field: The body field, query parameter, header-backed field or path
            segment at fault, when the server named one.
        retry_after: ``Retry-After`` in seconds (``overloaded``,
            ``rate_limited``, ``busy``), else ``None``.
        rule: The policy rule that refused a create (``policy_violation``).
        owner: The node holding the lease (``not_leader``).
        issues: Every problem of a rejected configuration (``invalid_config``).
        tx_id: The intent that holds the ``request_id``
            (``idempotency_conflict``): read it with ``get``.
        body: The decoded JSON body, or the raw text when it was not JSON.
        request_id: See :class:`TxmgrError`.
    """

    status: int
    code: ErrorCode | str | None
    message: str
    field: str | None
    retry_after: float | None
    rule: str | None
    owner: str | None
    issues: tuple[ErrorIssue, ...]
    tx_id: str | None
    body: Any

    def __init__(
        self,
        status: int,
        code: ErrorCode | str | None,
        message: str,
        *,
        field: str | None = None,
        retry_after: float | None = None,
        rule: str | None = None,
        owner: str | None = None,
        issues: tuple[ErrorIssue, ...] = (),
        tx_id: str | None = None,
        body: Any = None,
        request_id: str | None = None,
    ) -> None:
        where = f" (field {field})" if field else ""
        shown = _code_text(code) or "error"
        super().__init__(f"{status} {shown}{where}: {message}", request_id=request_id)
        self.status = status
        self.code = code
        self.message = message
        self.field = field
        self.retry_after = retry_after
        self.rule = rule
        self.owner = owner
        self.issues = issues
        self.tx_id = tx_id
        self.body = body

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(status={self.status!r}, code={_code_text(self.code)!r}, "
            f"field={self.field!r}, message={self.message!r}, retry_after={self.retry_after!r})"
        )


class ClientError(ApiError):
    """A 4xx answer: the request itself is at fault. Never retried, except
    429 (see :class:`RateLimitedError`)."""


class NotFoundError(ClientError):
    """404: ``not_found`` (no such transaction, another submitter's, or an
    unknown route) or ``aged_out`` (no such transaction, and its id is older
    than ``history.retain``: retention may have removed it)."""


class ConflictError(ClientError):
    """409: ``idempotency_conflict`` (the ``request_id`` belongs to an intent
    with another body), ``invalid_state`` (the state does not allow the
    action), ``chain_not_served`` or ``not_leader``."""


class RateLimitedError(ClientError):
    """429: ``overloaded`` (the submitter's queue is full) or
    ``rate_limited`` (the token's create rate, or the same action on one
    intent within its resubmit interval). ``retry_after`` says how long to
    wait. Raised once the retry policy gave up (or, for an action that is not
    idempotent, at once)."""


class ServerError(ApiError):
    """A 5xx answer. ``internal`` is a bug or corrupt data."""


class UnavailableError(ServerError):
    """503: ``unavailable`` (database or engine unavailable, or the request
    timed out: a create with the same ``request_id`` may be retried) or
    ``busy`` (the node is at capacity; nothing was done)."""


class TransportError(TxmgrError):
    """No answer was received (connection refused or reset, timeout, TLS
    failure) after the retries the policy allows. The ``httpx`` exception is
    the ``__cause__``. For a create, the intent may or may not have been
    stored: retry with the same ``request_id`` (``err.request_id``)."""


class ProtocolError(TxmgrError):
    """An answer this client cannot read: not JSON, or JSON of an unexpected
    shape. ``status`` and ``body`` are what was received."""

    status: int | None
    body: str | None

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        body: str | None = None,
        request_id: str | None = None,
    ) -> None:
        super().__init__(message, request_id=request_id)
        self.status = status
        self.body = body


class WaitTimeout(TxmgrError):
    """``wait_final`` ran out of time before every id was final.

    Attributes:
        pending: The ids not final yet.
        last: For one id (waited by GET): the transaction as last read.
        results: For several ids (waited by the feed): the ids already
            final, with their completion.
        after: For several ids: the feed cursor reached; pass it as
            ``after`` to resume waiting without reading the same rows again.
    """

    pending: frozenset[str]
    last: Transaction | None
    results: dict[str, Completion]
    after: str | None

    def __init__(
        self,
        pending: frozenset[str],
        *,
        last: Transaction | None = None,
        results: dict[str, Completion] | None = None,
        after: str | None = None,
    ) -> None:
        shown = ", ".join(sorted(pending)[:5]) + (" ..." if len(pending) > 5 else "")
        super().__init__(f"not final within the timeout: {shown}")
        self.pending = pending
        self.last = last
        self.results = dict(results or {})
        self.after = after


def _code_text(code: ErrorCode | str | None) -> str | None:
    if isinstance(code, ErrorCode):
        return code.value
    return code


def _error_class(status: int) -> type[ApiError]:
    if status == 404:
        return NotFoundError
    if status == 409:
        return ConflictError
    if status == 429:
        return RateLimitedError
    if status == 503:
        return UnavailableError
    if 400 <= status <= 499:
        return ClientError
    if 500 <= status <= 599:
        return ServerError
    return ApiError


def error_from_answer(
    status: int,
    headers: Mapping[str, str],
    content: bytes,
    *,
    request_id: str | None = None,
) -> ApiError:
    """Builds the error for a non-2xx answer: txmgr's error shape when the
    body has it, else a code-less error quoting the body."""
    retry_after = parse_retry_after(headers.get("retry-after"))
    cls = _error_class(status)
    text = content.decode("utf-8", errors="replace")
    try:
        decoded: Any = json.loads(text) if text else None
    except ValueError:
        decoded = None
    detail = decoded.get("error") if isinstance(decoded, dict) else None
    if not isinstance(detail, dict):
        return cls(
            status,
            None,
            text[:512] or f"HTTP {status}",
            retry_after=retry_after,
            body=decoded if decoded is not None else text,
            request_id=request_id,
        )
    raw_code = detail.get("code")
    code: ErrorCode | str | None
    if isinstance(raw_code, str):
        code = _KNOWN_CODES.get(raw_code, raw_code)
    else:
        code = None
    issues: list[ErrorIssue] = []
    raw_issues = detail.get("issues")
    if isinstance(raw_issues, list):
        for item in raw_issues:
            if isinstance(item, dict):
                issues.append(ErrorIssue(key=str(item.get("key", "")), reason=str(item.get("reason", ""))))
    return cls(
        status,
        code,
        str(detail.get("message", "")),
        field=_opt_str(detail.get("field")),
        retry_after=retry_after,
        rule=_opt_str(detail.get("rule")),
        owner=_opt_str(detail.get("owner")),
        issues=tuple(issues),
        tx_id=_opt_str(detail.get("tx_id")),
        body=decoded,
        request_id=request_id,
    )


def _opt_str(value: object) -> str | None:
    return value if isinstance(value, str) else None
