"""Type-checked (``mypy --strict``, by test.sh) against the installed wheel,
never run: what a user's code sees of the package's types (``py.typed``, the
``wait_final`` overloads, the error attributes)."""

from __future__ import annotations

import asyncio

from txmgr_client import (
    AsyncClient,
    Client,
    ClientError,
    Completion,
    ErrorCode,
    FeedPage,
    Transaction,
    TxState,
)
from txmgr_client.webhook import WebhookDelivery, verify_request


def sync_usage(txmgr: Client) -> None:
    created = txmgr.create("0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266", to="0x" + "00" * 20, value=1)
    one: Transaction = txmgr.wait_final(created.tx_id, timeout=60)
    many: dict[str, Completion] = txmgr.wait_final([created.tx_id], timeout=60, after=None)
    state: TxState | str = one.state
    for page in txmgr.follow(after=None):
        cursor: str | None = page.next_after
        assert isinstance(page, FeedPage) and cursor is not None
        break
    try:
        txmgr.cancel(created.tx_id)
    except ClientError as err:
        code: ErrorCode | str | None = err.code
        field: str | None = err.field
        retry_after: float | None = err.retry_after
        print(code, field, retry_after, state, many)


async def async_usage(txmgr: AsyncClient) -> None:
    created = await txmgr.create("0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266", value="0x1")
    one: Transaction = await txmgr.wait_final(created.tx_id)
    many: dict[str, Completion] = await txmgr.wait_final([created.tx_id])
    async for page in txmgr.follow():
        rows: list[Completion] = page.items
        print(rows, one, many)
        break


def receive(headers: dict[str, str], body: bytes) -> WebhookDelivery:
    return verify_request(headers, body, secret=["new", b"old"], tolerance=300)


if __name__ == "__main__":
    asyncio.run(async_usage(AsyncClient()))
