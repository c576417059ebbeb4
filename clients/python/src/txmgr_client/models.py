"""The wire types of the txmgr API, as frozen dataclasses.

Each ``from_json`` reads the server's JSON and ignores fields it does not
know (a newer server may add some); the whole object stays in ``raw``.
Amounts of wei arrive as decimal strings (a uint256 does not fit a JSON
number) and are returned as Python ``int``, which holds them exactly.
States arrive as strings: a known one becomes a member of :class:`TxState`,
:class:`SubState` or :class:`FeedEvent` (which compare equal to, and print as, their
string), an unknown one stays a ``str``.

Sources: ``TxView`` / ``ReceiptView`` (``actors/src/store/tx_query/mod.rs``),
``CreatedBody`` (``src/http/transactions.rs``), ``Page``
(``src/http/tx_reads.rs``), ``ActionAccepted`` (``src/http/tx_actions.rs``),
``CompletionRow`` (``actors/src/store/completions.rs``), ``FeedPage``
(``src/http/completions.rs``), the webhook ``Envelope``
(``actors/src/webhook/actor.rs``).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, TypeVar

__all__ = [
    "FINAL_STATES",
    "ActionResult",
    "Completion",
    "CreatedTransaction",
    "FeedEvent",
    "FeedPage",
    "Receipt",
    "SubState",
    "Transaction",
    "TransactionPage",
    "TxState",
    "WebhookEvent",
    "parse_timestamp",
]


class TxState(str, enum.Enum):
    """Lifecycle state of an intent (``TxState`` in
    ``actors/src/domain/state.rs``)."""

    def __str__(self) -> str:
        return str(self.value)

    QUEUED = "QUEUED"
    ALLOCATED = "ALLOCATED"
    TRACKING = "TRACKING"
    STUCK = "STUCK"
    CONFIRMED = "CONFIRMED"
    FAILED_FINAL = "FAILED_FINAL"
    REJECTED = "REJECTED"
    CANCELLED = "CANCELLED"


#: The terminal states (``TxState::is_terminal``): each wrote a completion
#: row. A reorg deeper than finality can still re-open CONFIRMED,
#: FAILED_FINAL or CANCELLED (the feed then says ``REORGED_OUT``), which is
#: rare and reported, never silent.
FINAL_STATES: frozenset[str] = frozenset(
    {"CONFIRMED", "FAILED_FINAL", "REJECTED", "CANCELLED"}
)


class SubState(str, enum.Enum):
    """Finer detail within a state (``SubState`` in
    ``actors/src/domain/sub_state.rs``; note ``stuck_stuck_after``, spelt so
    on the wire)."""

    def __str__(self) -> str:
        return str(self.value)

    AWAITING_RECEIPT = "awaiting_receipt"
    MINED = "mined"
    REORGED = "reorged"
    FEE_BUMPED = "fee_bumped"
    CANCELLING = "cancelling"
    FEE_CAP_REACHED = "fee_cap_reached"
    CANCEL_AT_FEE_CAP = "cancel_at_fee_cap"
    STUCK_AFTER = "stuck_stuck_after"
    STUCK_MAX_RESUBMITS = "stuck_max_resubmits"
    NONCE_CONSUMED_EXTERNALLY = "nonce_consumed_externally"
    CANCELLED_BY_OPERATOR = "cancelled_by_operator"
    REQUEUED_BY_OPERATOR = "requeued_by_operator"
    FILLER = "filler"
    FILLER_NOT_INCLUDED = "filler_not_included"
    EXPIRED = "expired"
    SPEND_LIMITED = "spend_limited"
    PAUSED = "paused"


class FeedEvent(str, enum.Enum):
    """What a completion-feed row (and a webhook event) reports
    (``FeedEvent`` in ``actors/src/domain/feed_event.rs``)."""

    def __str__(self) -> str:
        return str(self.value)

    CONFIRMED = "CONFIRMED"
    FAILED_FINAL = "FAILED_FINAL"
    REJECTED = "REJECTED"
    CANCELLED = "CANCELLED"
    #: Entered STUCK: not final, may still confirm (and appear again).
    STUCK = "STUCK"
    #: A final transaction's block was removed by a reorg deeper than
    #: finality: not on chain any more; a new terminal row follows.
    REORGED_OUT = "REORGED_OUT"
    #: Funds event (only with ``funds=True``): balance below ``min_balance``.
    LOW_BALANCE = "LOW_BALANCE"
    #: Funds event (only with ``funds=True``): balance back above it.
    BALANCE_RESTORED = "BALANCE_RESTORED"


_E = TypeVar("_E", bound=enum.Enum)


def _enum(kind: type[_E], value: Any) -> _E | str:
    text = str(value)
    try:
        return kind(text)
    except ValueError:
        return text


def _state_name(state: object) -> str:
    return state.value if isinstance(state, enum.Enum) else str(state)


def _opt_str(value: Any) -> str | None:
    return None if value is None else str(value)


def _opt_int(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError(f"expected an integer, got {value!r}")
    return int(value)


_TIMESTAMP = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?"
    r"(?:([Zz])|([+-])(\d{2}):?(\d{2}))"
)


def parse_timestamp(text: str) -> datetime:
    """Reads an RFC 3339 timestamp as the server writes it (``Z`` or an
    offset, any number of fractional digits; beyond microseconds they are
    truncated) into an aware ``datetime``. Python 3.10's ``fromisoformat``
    reads neither ``Z`` nor nanoseconds, hence this parser."""
    match = _TIMESTAMP.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"not an RFC 3339 timestamp: {text!r}")
    year, month, day, hour, minute, second = (int(match.group(i)) for i in range(1, 7))
    fraction = match.group(7) or ""
    micros = int((fraction + "000000")[:6])
    if match.group(8):
        tz = timezone.utc
    else:
        sign = -1 if match.group(9) == "-" else 1
        offset = timedelta(hours=int(match.group(10)), minutes=int(match.group(11)))
        tz = timezone(sign * offset)
    # A leap second (60) is folded into the last second of its minute.
    return datetime(year, month, day, hour, minute, min(second, 59), micros, tzinfo=tz)


def _opt_timestamp(value: Any) -> datetime | None:
    return None if value is None else parse_timestamp(str(value))


@dataclass(frozen=True, kw_only=True)
class Receipt:
    """The parts of the mined attempt's receipt a client needs."""

    #: Block that includes the mined attempt.
    block_number: int
    #: Hash of that block, lower-case ``0x`` hex.
    block_hash: str
    #: 1 = success, 0 = reverted (EIP-658); ``None`` when unreadable.
    status: int | None
    #: Gas used by the transaction.
    gas_used: int | None
    #: Price paid per gas, in wei.
    effective_gas_price: int | None
    #: The JSON object as received.
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Receipt:
        """Reads a ``ReceiptView``; unknown fields are ignored."""
        return cls(
            block_number=int(data["block_number"]),
            block_hash=str(data["block_hash"]),
            status=_opt_int(data.get("status")),
            gas_used=_opt_int(data.get("gas_used")),
            effective_gas_price=_opt_int(data.get("effective_gas_price")),
            raw=data,
        )


@dataclass(frozen=True, kw_only=True)
class Transaction:
    """One managed transaction (``GET /v1/transactions/{tx_id}``)."""

    #: The chain it is sent on (EIP-155 id).
    chain_id: int
    #: The intent's id (a UUID, lower-case hyphenated).
    tx_id: str
    #: The submitter's address, lower-case ``0x`` hex.
    submitter: str
    #: The caller's idempotency key.
    request_id: str | None
    #: Lifecycle state.
    state: TxState | str
    #: Finer detail within the state.
    sub_state: SubState | str | None
    #: The nonce, once allocated.
    nonce: int | None
    #: Hash of the latest signed attempt.
    tx_hash: str | None
    #: Hash of the attempt that was mined (may differ from ``tx_hash``).
    mined_tx_hash: str | None
    #: Recipient, lower-case ``0x`` hex; ``None`` = contract creation.
    to: str | None
    #: Wei sent.
    value: int
    #: Call data (or init code), ``0x`` hex.
    data: str
    #: How many signed attempts exist.
    attempts: int
    #: The last error the engine recorded, for humans.
    last_error: str | None
    #: The receipt of the mined attempt, once there is one.
    receipt: Receipt | None
    #: Blocks on top of the receipt's block, itself included, by the head
    #: the answering node has seen.
    confirmations: int | None
    #: When the intent was accepted.
    created_at: datetime
    #: When the row last changed.
    updated_at: datetime
    #: When the intent reached a final receipt.
    confirmed_at: datetime | None
    #: The JSON object as received.
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def is_final(self) -> bool:
        """Whether the state is terminal (CONFIRMED, FAILED_FINAL, REJECTED,
        CANCELLED)."""
        return _state_name(self.state) in FINAL_STATES

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Transaction:
        """Reads a ``TxView``; unknown fields are ignored."""
        receipt = data.get("receipt")
        sub_state = data.get("sub_state")
        return cls(
            chain_id=int(data["chain_id"]),
            tx_id=str(data["tx_id"]),
            submitter=str(data["submitter"]),
            request_id=_opt_str(data.get("request_id")),
            state=_enum(TxState, data["state"]),
            sub_state=None if sub_state is None else _enum(SubState, sub_state),
            nonce=_opt_int(data.get("nonce")),
            tx_hash=_opt_str(data.get("tx_hash")),
            mined_tx_hash=_opt_str(data.get("mined_tx_hash")),
            to=_opt_str(data.get("to")),
            value=int(data.get("value") or 0),
            data=str(data.get("data") or "0x"),
            attempts=int(data.get("attempts") or 0),
            last_error=_opt_str(data.get("last_error")),
            receipt=Receipt.from_json(receipt) if isinstance(receipt, Mapping) else None,
            confirmations=_opt_int(data.get("confirmations")),
            created_at=parse_timestamp(str(data["created_at"])),
            updated_at=parse_timestamp(str(data["updated_at"])),
            confirmed_at=_opt_timestamp(data.get("confirmed_at")),
            raw=data,
        )


@dataclass(frozen=True, kw_only=True)
class CreatedTransaction:
    """The answer to a create (``CreatedBody``)."""

    #: The chain it is sent on.
    chain_id: int
    #: The intent's id.
    tx_id: str
    #: Its state now (QUEUED when new).
    state: TxState | str
    #: Lower-case ``0x`` hex.
    submitter: str
    #: The idempotency key sent (always set by this client).
    request_id: str | None
    #: ``True`` when the server answered 200 (an intent with this
    #: ``request_id`` and the same body existed), ``False`` on 202 (new).
    #: A retry of a create whose first answer was lost answers 200 although
    #: that first attempt made the intent: ``replayed`` says "already
    #: stored", not "stored by someone else".
    replayed: bool
    #: The JSON object as received.
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, data: Mapping[str, Any], *, replayed: bool) -> CreatedTransaction:
        """Reads a ``CreatedBody``; unknown fields are ignored."""
        return cls(
            chain_id=int(data["chain_id"]),
            tx_id=str(data["tx_id"]),
            state=_enum(TxState, data["state"]),
            submitter=str(data["submitter"]),
            request_id=_opt_str(data.get("request_id")),
            replayed=replayed,
            raw=data,
        )


@dataclass(frozen=True, kw_only=True)
class TransactionPage:
    """One page of ``GET /v1/transactions?submitter=...``."""

    #: In acceptance order.
    items: list[Transaction]
    #: Pass as ``after`` for the next page; ``None`` on the last page. A page
    #: may hold fewer than ``limit`` items while ``next`` is set (it also ends
    #: at ``http.page_max_bytes``): always follow ``next``.
    next: str | None
    #: The JSON object as received.
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TransactionPage:
        """Reads a ``Page``; unknown fields are ignored."""
        return cls(
            items=[Transaction.from_json(item) for item in data.get("items") or []],
            next=_opt_str(data.get("next")),
            raw=data,
        )


@dataclass(frozen=True, kw_only=True)
class ActionResult:
    """The answer to cancel / speed-up / rebroadcast / requeue
    (``ActionAccepted``)."""

    #: The transaction.
    tx_id: str
    #: ``cancel``, ``speedup``, ``rebroadcast`` or ``requeue``.
    action: str
    #: ``done`` (carried out at once), ``requested`` (the leader acts next)
    #: or ``unchanged`` (a cancel of an intent already being cancelled).
    status: str
    #: The state after the request.
    state: TxState | str
    #: The JSON object as received.
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ActionResult:
        """Reads an ``ActionAccepted``; unknown fields are ignored."""
        return cls(
            tx_id=str(data["tx_id"]),
            action=str(data["action"]),
            status=str(data["status"]),
            state=_enum(TxState, data["state"]),
            raw=data,
        )


def _completion_fields(data: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "cursor": str(data["cursor"]),
        "chain_id": int(data["chain_id"]),
        "tx_id": _opt_str(data.get("tx_id")),
        "submitter": str(data["submitter"]),
        "request_id": _opt_str(data.get("request_id")),
        "state": _enum(FeedEvent, data["state"]),
        "tx_hash": _opt_str(data.get("tx_hash")),
        "block_number": _opt_int(data.get("block_number")),
        "nonce": _opt_int(data.get("nonce")),
        "reason": _opt_str(data.get("reason")),
        "balance_wei": _opt_int(data.get("balance_wei")),
        "min_balance_wei": _opt_int(data.get("min_balance_wei")),
        "completed_at": parse_timestamp(str(data["completed_at"])),
        "raw": data,
    }


@dataclass(frozen=True, kw_only=True)
class Completion:
    """One row of the completion feed (``CompletionRow``): a transaction's
    terminal transition or entry into STUCK, a ``REORGED_OUT`` correction,
    or (with ``funds=True``) a funds event."""

    #: This row's position; passing it as ``after`` continues after it.
    cursor: str
    #: The chain (EIP-155 id).
    chain_id: int
    #: The intent; ``None`` for funds events.
    tx_id: str | None
    #: The submitter's address, lower-case ``0x`` hex.
    submitter: str
    #: The caller's idempotency key, if it gave one.
    request_id: str | None
    #: The event.
    state: FeedEvent | str
    #: Hash of the mined attempt (else the latest sent), when there was one.
    tx_hash: str | None
    #: Block of the receipt, for CONFIRMED and FAILED_FINAL.
    block_number: int | None
    #: The nonce, once one was assigned.
    nonce: int | None
    #: Why, for REJECTED, STUCK, FAILED_FINAL, CANCELLED and REORGED_OUT.
    reason: str | None
    #: Funds events: the balance read, in wei.
    balance_wei: int | None
    #: Funds events: the submitter's ``min_balance``, in wei.
    min_balance_wei: int | None
    #: Database time of the transition.
    completed_at: datetime
    #: The JSON object as received.
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def is_final(self) -> bool:
        """Whether the row reports a terminal state (not STUCK, REORGED_OUT
        or a funds event)."""
        return _state_name(self.state) in FINAL_STATES

    @property
    def is_funds(self) -> bool:
        """Whether the row is a funds event (LOW_BALANCE, BALANCE_RESTORED)."""
        return _state_name(self.state) in ("LOW_BALANCE", "BALANCE_RESTORED")

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Completion:
        """Reads a ``CompletionRow``; unknown fields are ignored."""
        return cls(**_completion_fields(data))


@dataclass(frozen=True, kw_only=True)
class FeedPage:
    """One page of ``GET /v1/completions``."""

    #: The rows, in feed order (possibly none).
    items: list[Completion]
    #: Pass as ``after`` next time: the last row's cursor, or the ``after``
    #: given when nothing was ready; ``None`` only when nothing was ever
    #: served. It may move past rows the caller may not see (other chains,
    #: other submitters, funds events), so an empty page's cursor is worth
    #: storing too.
    next_after: str | None
    #: The JSON object as received.
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> FeedPage:
        """Reads a ``FeedPage``; unknown fields are ignored."""
        return cls(
            items=[Completion.from_json(item) for item in data.get("items") or []],
            next_after=_opt_str(data.get("next_after")),
            raw=data,
        )


@dataclass(frozen=True, kw_only=True)
class WebhookEvent(Completion):
    """The body of a webhook delivery: the feed row plus the delivery id and
    the webhook's name (``WebhookEvent`` in the OpenAPI document: the row's
    fields flattened in)."""

    #: The delivery id, ``<webhook>:<cursor>``: the same on every attempt
    #: (and in ``x-txmgr-delivery``); deduplicate on it.
    id: str
    #: The webhook's configured name.
    webhook: str

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> WebhookEvent:
        """Reads a delivery body; unknown fields are ignored."""
        return cls(id=str(data["id"]), webhook=str(data["webhook"]), **_completion_fields(data))
