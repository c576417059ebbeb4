"""Fixtures: the installed package (never ``src/``), and one real stack per
session (PostgreSQL database, anvil, ``txmgr run``, webhook receiver, proxy)
for the daemon tests. A missing tool or variable fails the run."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import txmgr_client  # noqa: E402

from harness import Stack  # noqa: E402

SRC = (Path(__file__).resolve().parent.parent / "src").resolve()


def pytest_configure(config: pytest.Config) -> None:
    installed = Path(txmgr_client.__file__).resolve()
    if SRC in installed.parents:
        raise pytest.UsageError(
            f"txmgr_client was imported from {installed}, the source tree: the tests "
            "check the built wheel; run clients/python/test.sh (or pip install the wheel)"
        )


def pytest_report_header(config: pytest.Config) -> str:
    return f"txmgr_client {txmgr_client.__version__} from {Path(txmgr_client.__file__).parent}"


#: The daemon's log, kept when a test failed, shown in the summary.
_failed_log: list[str] = []


@pytest.fixture(scope="session")
def stack(request: pytest.FixtureRequest) -> Iterator[Stack]:
    running = Stack()
    try:
        yield running
    finally:
        if request.session.testsfailed and running.daemon is not None:
            _failed_log.append(running.daemon.log_tail(120))
        running.close()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    for log in _failed_log:
        terminalreporter.section("txmgr log (last lines)")
        terminalreporter.write_line(log)
