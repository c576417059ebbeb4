"""Freshness: the hand-written models and requests against the daemon's
OpenAPI 3.1 document — ``clients/openapi.json`` (the ``document_file``
cases, run first by test.sh) and what the running daemon serves at
``GET /v1/openapi.json`` (the ``served`` cases).

The schemas are reached through the routes the client calls (the create's
request body and answers, a read's answer, the feed's page, an error
answer), not by name, so a schema renamed or re-routed is followed, while a
field renamed, added, removed, made optional or given another enum fails
here. The requests are read from the client's own request builders
(``_core``'s operations yield their ``HttpCall`` before any I/O).
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import inspect
import json
import os
import re
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from txmgr_client import (
    ActionResult,
    ApiError,
    AsyncClient,
    Client,
    Completion,
    CreatedTransaction,
    ErrorCode,
    ErrorIssue,
    FeedEvent,
    FeedPage,
    RetryPolicy,
    SubState,
    Transaction,
    TransactionPage,
    TxState,
    WebhookEvent,
)
from txmgr_client import _core

REPO = Path(__file__).resolve().parents[3]
DOCUMENT = Path(os.environ.get("TXMGR_OPENAPI", REPO / "clients" / "openapi.json"))
TX_ID = "0190abcd-0000-7000-8000-000000000000"
ADDRESS = "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266"


@pytest.fixture(scope="module", params=["document_file", "served"])
def doc(request: pytest.FixtureRequest) -> dict[str, Any]:
    if request.param == "document_file":
        loaded: dict[str, Any] = json.loads(DOCUMENT.read_text())
        return loaded
    stack = request.getfixturevalue("stack")
    stack.daemon.ready()
    served: dict[str, Any] = httpx.get(f"{stack.daemon.base}/v1/openapi.json", timeout=10).json()
    return served


# --- reading the document ------------------------------------------------------------------


def resolve(doc: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    seen = 0
    while "$ref" in node:
        ref = node["$ref"]
        assert ref.startswith("#/"), ref
        target: Any = doc
        for part in ref[2:].split("/"):
            target = target[part.replace("~1", "/").replace("~0", "~")]
        node = target
        seen += 1
        assert seen < 20, f"a $ref loop at {ref}"
    return node


def alternatives(doc: dict[str, Any], node: dict[str, Any]) -> list[dict[str, Any]]:
    """The schemas a value may match: ``oneOf`` / ``anyOf`` members, else the
    node itself (each resolved)."""
    node = resolve(doc, node)
    for key in ("oneOf", "anyOf"):
        if key in node:
            return [alt for member in node[key] for alt in alternatives(doc, member)]
    return [node]


def is_null(node: dict[str, Any]) -> bool:
    return node.get("type") == "null" or node.get("type") == ["null"]


def nullable(doc: dict[str, Any], node: dict[str, Any]) -> bool:
    for alt in alternatives(doc, node):
        kind = alt.get("type")
        if is_null(alt) or (isinstance(kind, list) and "null" in kind) or alt.get("nullable"):
            return True
    return False


def non_null(doc: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    """The one non-null schema of a value (an ``Option<T>``'s ``T``)."""
    alts = [alt for alt in alternatives(doc, node) if not is_null(alt)]
    assert len(alts) == 1, f"expected one non-null schema, got {alts}"
    return alts[0]


def kinds(node: dict[str, Any]) -> set[str]:
    kind = node.get("type")
    if kind is None:
        return set()
    return ({kind} if isinstance(kind, str) else set(kind)) - {"null"}


def operation(doc: dict[str, Any], method: str, path: str) -> dict[str, Any]:
    assert path in doc["paths"], f"{path} is not in the document"
    assert method in doc["paths"][path], f"{method.upper()} {path} is not in the document"
    op: dict[str, Any] = doc["paths"][path][method]
    return op


def answer_schema(doc: dict[str, Any], method: str, path: str, status: str) -> dict[str, Any]:
    responses = operation(doc, method, path)["responses"]
    assert status in responses, f"{method.upper()} {path} documents no {status}"
    response = resolve(doc, responses[status])
    schema: dict[str, Any] = response["content"]["application/json"]["schema"]
    return schema


# --- comparing a dataclass with a schema ---------------------------------------------------------


def python_types(hint: Any) -> list[Any]:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return list(typing.get_args(hint))
    return [hint]


def check_value(doc: dict[str, Any], where: str, hint: Any, schema: dict[str, Any]) -> None:
    """The Python type of one field against its (non-null) schema."""
    options = [t for t in python_types(hint) if t is not type(None)]
    enums = [t for t in options if isinstance(t, type) and issubclass(t, enum.Enum)]
    if enums:
        (kind,) = enums
        assert "enum" in schema, f"{where}: {kind.__name__} but the schema has no enum: {schema}"
        wire = set(schema["enum"]) - {None}
        mine = {member.value for member in kind}
        assert mine == wire, (
            f"{where}: {kind.__name__} is out of date: "
            f"missing {sorted(wire - mine)}, not on the server {sorted(mine - wire)}"
        )
        return
    (python,) = options
    origin = typing.get_origin(python)
    if origin is list:
        assert kinds(schema) == {"array"}, f"{where}: a list, the schema says {schema}"
        (item,) = typing.get_args(python)
        check_value(doc, f"{where}[]", item, non_null(doc, schema["items"]))
        return
    if isinstance(python, type) and dataclasses.is_dataclass(python):
        check_model(doc, python, schema, where=where)
        return
    wire = kinds(schema)
    if python is bool:
        assert wire == {"boolean"}, f"{where}: bool, the schema says {schema}"
    elif python is int:
        # Integers, and amounts of wei (decimal strings: a uint256 is no JSON number).
        digits = schema.get("pattern") in ("^[0-9]+$", r"^\d+$")
        assert wire == {"integer"} or (wire == {"string"} and digits), (
            f"{where}: int, the schema says {schema}"
        )
    elif python is str:
        assert wire == {"string"}, f"{where}: str, the schema says {schema}"
    elif python is datetime.datetime:
        assert wire == {"string"} and schema.get("format") == "date-time", (
            f"{where}: datetime, the schema says {schema}"
        )
    else:  # pragma: no cover - a model field of a type this check does not know
        raise AssertionError(f"{where}: no rule for {python!r}")


def check_model(
    doc: dict[str, Any],
    model: type[Any],
    schema: dict[str, Any],
    *,
    where: str | None = None,
    client_only: frozenset[str] = frozenset(),
) -> None:
    """Fields, required-ness / nullability and types of a dataclass model
    against an object schema."""
    where = where or model.__name__
    obj = non_null(doc, schema)
    assert kinds(obj) == {"object"}, f"{where}: not an object schema: {obj}"
    properties: dict[str, Any] = obj.get("properties", {})
    required = set(obj.get("required", []))
    hints = typing.get_type_hints(model)
    fields = {f.name for f in dataclasses.fields(model)} - {"raw"} - client_only
    assert fields == set(properties), (
        f"{where} ({model.__name__}): missing {sorted(set(properties) - fields)}, "
        f"gone from the server {sorted(fields - set(properties))}"
    )
    for name in sorted(fields):
        optional_here = type(None) in python_types(hints[name])
        optional_there = name not in required or nullable(doc, properties[name])
        assert optional_here == optional_there, (
            f"{where}.{name}: {'optional' if optional_here else 'required'} here, "
            f"{'optional' if optional_there else 'required'} on the server"
        )
        check_value(doc, f"{where}.{name}", hints[name], non_null(doc, properties[name]))


# --- the requests the client sends ------------------------------------------------------------------------


def first_call(op: Iterator[Any]) -> _core.HttpCall:
    call = next(op)
    assert isinstance(call, _core.HttpCall)
    return call


def template(path: str) -> str:
    return re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "{tx_id}", path)


POLICY = RetryPolicy.never()


def every_request() -> list[_core.HttpCall]:
    """One request per route the client calls, with every optional
    parameter it can send."""
    calls = [
        first_call(
            _core.create(
                POLICY,
                submitter=ADDRESS,
                request_id="r",
                chain_id=31337,
                to=ADDRESS,
                value=1,
                data=b"\x01",
                gas_limit=21000,
                max_fee_per_gas=2,
                max_priority_fee_per_gas=1,
                private=False,
                valid_until="2030-01-01T00:00:00Z",
            )
        ),
        first_call(_core.get(POLICY, TX_ID)),
        first_call(_core.get_by_request_id(POLICY, ADDRESS, "r", 31337)),
        first_call(
            _core.list_page(POLICY, ADDRESS, chain_ids=[31337], state="QUEUED", limit=5, after="c")
        ),
        first_call(
            _core.feed_page(POLICY, after="1-2", limit=5, wait=1.0, chain_ids=[31337], funds=True)
        ),
    ]
    calls += [first_call(_core.action(POLICY, name, TX_ID, "why")) for name in _core.ACTIONS]
    return calls


def test_every_route_and_query_parameter_the_client_uses_is_documented(doc: dict[str, Any]) -> None:
    for call in every_request():
        op = operation(doc, call.method.lower(), template(call.path))
        documented = {p["name"] for p in (resolve(doc, p) for p in op.get("parameters", [])) if p["in"] == "query"}
        sent = {name for name, _ in call.params}
        assert sent <= documented, f"{call.method} {call.path}: {sorted(sent - documented)} undocumented"
    # The listing and the feed: every documented parameter is one the client can send.
    assert {name for name, _ in every_request()[3].params} | {"request_id"} == {
        p["name"] for p in operation(doc, "get", "/v1/transactions").get("parameters", [])
        if resolve(doc, p)["in"] == "query"
    }
    assert {name for name, _ in every_request()[4].params} == {
        p["name"] for p in operation(doc, "get", "/v1/completions").get("parameters", [])
        if resolve(doc, p)["in"] == "query"
    }


def test_create_arguments_are_the_create_body(doc: dict[str, Any]) -> None:
    body_schema = operation(doc, "post", "/v1/transactions")["requestBody"]["content"][
        "application/json"
    ]["schema"]
    obj = non_null(doc, body_schema)
    properties = set(obj["properties"])
    required = set(obj.get("required", []))
    sent = json.loads(every_request()[0].body or b"{}")
    assert set(sent) == properties, (
        f"create body: missing {sorted(properties - set(sent))}, gone {sorted(set(sent) - properties)}"
    )
    for client in (Client, AsyncClient):
        parameters = inspect.signature(client.create).parameters
        names = set(parameters) - {"self"}
        assert names == properties, f"{client.__name__}.create: {sorted(names ^ properties)}"
        positional = {
            name
            for name, p in parameters.items()
            if name != "self" and p.default is inspect.Parameter.empty
        }
        assert positional == required, f"{client.__name__}.create: required {sorted(required)}"
    for name in ("value", "max_fee_per_gas", "max_priority_fee_per_gas"):
        assert isinstance(sent[name], str), f"{name} is sent as a string of wei"
    assert isinstance(sent["gas_limit"], int)


def test_create_answers(doc: dict[str, Any]) -> None:
    for status in ("202", "200"):
        check_model(
            doc,
            CreatedTransaction,
            answer_schema(doc, "post", "/v1/transactions", status),
            client_only=frozenset({"replayed"}),
        )


def test_transaction_and_receipt(doc: dict[str, Any]) -> None:
    check_model(doc, Transaction, answer_schema(doc, "get", "/v1/transactions/{tx_id}", "200"))


def test_transaction_page(doc: dict[str, Any]) -> None:
    # By request id the route answers one transaction, else a page.
    schema = answer_schema(doc, "get", "/v1/transactions", "200")
    objects = [alt for alt in alternatives(doc, schema) if not is_null(alt)]
    pages = [alt for alt in objects if "next" in alt.get("properties", {})]
    singles = [alt for alt in objects if "tx_id" in alt.get("properties", {})]
    assert len(pages) == 1, f"no page schema among {objects}"
    check_model(doc, TransactionPage, pages[0])
    if len(objects) > 1:
        assert len(singles) == 1
        check_model(doc, Transaction, singles[0])


def test_action_answers(doc: dict[str, Any]) -> None:
    for action in _core.ACTIONS:
        path = f"/v1/transactions/{{tx_id}}/{action}"
        check_model(doc, ActionResult, answer_schema(doc, "post", path, "202"), where=action)
        schema = non_null(doc, answer_schema(doc, "post", path, "202"))
        assert action in schema["properties"]["action"].get("pattern", action)


def test_feed_page_and_completion_rows(doc: dict[str, Any]) -> None:
    check_model(doc, FeedPage, answer_schema(doc, "get", "/v1/completions", "200"))
    page = non_null(doc, answer_schema(doc, "get", "/v1/completions", "200"))
    row = non_null(doc, page["properties"]["items"]["items"])
    check_model(doc, Completion, row)


def test_webhook_event_is_the_completion_row_plus_its_delivery(doc: dict[str, Any]) -> None:
    # The body receivers get: the feed row flattened in, with `id` and `webhook`.
    schema = doc["components"]["schemas"]["WebhookEvent"]
    parts = schema["allOf"]
    refs = [part["$ref"] for part in parts if "$ref" in part]
    assert refs == ["#/components/schemas/CompletionRow"], refs
    own = [part for part in parts if "properties" in part]
    assert len(own) == 1, parts
    row_fields = {f.name for f in dataclasses.fields(Completion)}
    extra = {f.name for f in dataclasses.fields(WebhookEvent)} - row_fields
    assert set(own[0]["properties"]) == extra, sorted(set(own[0]["properties"]) ^ extra)
    assert set(own[0].get("required", [])) == extra
    check_model(doc, Completion, doc["components"]["schemas"]["CompletionRow"])


def test_state_enums(doc: dict[str, Any]) -> None:
    tx = non_null(doc, answer_schema(doc, "get", "/v1/transactions/{tx_id}", "200"))
    for name, kind in (("state", TxState), ("sub_state", SubState)):
        wire = set(non_null(doc, tx["properties"][name])["enum"])
        assert wire == {m.value for m in kind}, f"{kind.__name__}: {sorted(wire ^ {m.value for m in kind})}"
    page = non_null(doc, answer_schema(doc, "get", "/v1/completions", "200"))
    row = non_null(doc, page["properties"]["items"]["items"])
    wire = set(non_null(doc, row["properties"]["state"])["enum"])
    assert wire == {m.value for m in FeedEvent}


def test_error_body_and_its_24_codes(doc: dict[str, Any]) -> None:
    bodies = [
        answer_schema(doc, "post", "/v1/transactions", status) for status in ("400", "409", "429", "503")
    ]
    for body in bodies:
        error = non_null(doc, non_null(doc, body)["properties"]["error"])
        properties = error["properties"]
        wire_codes = set(non_null(doc, properties["code"])["enum"])
        assert wire_codes == {code.value for code in ErrorCode}, sorted(
            wire_codes ^ {code.value for code in ErrorCode}
        )
        assert len(wire_codes) == 24
        # Every field of the error detail is an attribute of ApiError.
        attributes = typing.get_type_hints(ApiError)
        assert set(properties) <= set(attributes), sorted(set(properties) - set(attributes))
        assert set(non_null(doc, error).get("required", [])) == {"code", "message"}
        for name in set(properties) - {"code", "issues"}:
            check_value(doc, f"ErrorDetail.{name}", attributes[name], non_null(doc, properties[name]))
        issues = non_null(doc, properties["issues"])
        check_model(doc, ErrorIssue, non_null(doc, issues["items"]))


def test_the_committed_document_is_what_the_daemon_serves(stack: Any) -> None:
    stack.daemon.ready()
    served = httpx.get(f"{stack.daemon.base}/v1/openapi.json", timeout=10).json()
    committed = json.loads(DOCUMENT.read_text())
    assert served == committed, "clients/openapi.json is not what this daemon serves"
