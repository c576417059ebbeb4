"""Python client of txmgr, the daemon that sends EVM transactions for backend
services.

- :class:`Client` (sync) and :class:`AsyncClient` (asyncio): create an intent
  (idempotent on ``request_id``, retried with backoff), read it by id or by
  ``request_id``, list, cancel / speed up / rebroadcast / requeue, wait until
  final, read and follow the completion feed.
- :mod:`txmgr_client.webhook`: verify webhook deliveries.
- :mod:`txmgr_client.errors`: every error carries the server's machine
  ``code`` and ``field``.
"""

from ._retry import RetryPolicy
from .aio import AsyncClient
from .client import Client, ssl_context
from .errors import (
    ApiError,
    ClientError,
    ConflictError,
    ErrorCode,
    ErrorIssue,
    NotFoundError,
    ProtocolError,
    RateLimitedError,
    ServerError,
    TransportError,
    TxmgrError,
    UnavailableError,
    WaitTimeout,
)
from .feed import AsyncFeedFollower, FeedFollower
from .models import (
    FINAL_STATES,
    ActionResult,
    Completion,
    CreatedTransaction,
    FeedEvent,
    FeedPage,
    Receipt,
    SubState,
    Transaction,
    TransactionPage,
    TxState,
    WebhookEvent,
)
from .webhook import (
    VerificationFailure,
    WebhookDelivery,
    WebhookVerificationError,
    verify,
    verify_request,
)

__version__ = "0.1.0"

__all__ = [
    "FINAL_STATES",
    "ActionResult",
    "ApiError",
    "AsyncClient",
    "AsyncFeedFollower",
    "Client",
    "ClientError",
    "Completion",
    "ConflictError",
    "CreatedTransaction",
    "ErrorCode",
    "ErrorIssue",
    "FeedEvent",
    "FeedFollower",
    "FeedPage",
    "NotFoundError",
    "ProtocolError",
    "RateLimitedError",
    "Receipt",
    "RetryPolicy",
    "ServerError",
    "SubState",
    "Transaction",
    "TransactionPage",
    "TransportError",
    "TxState",
    "TxmgrError",
    "UnavailableError",
    "VerificationFailure",
    "WaitTimeout",
    "WebhookDelivery",
    "WebhookEvent",
    "WebhookVerificationError",
    "ssl_context",
    "verify",
    "verify_request",
]
