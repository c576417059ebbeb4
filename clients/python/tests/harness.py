"""The real processes the daemon tests run against: a fresh PostgreSQL
database, anvil, ``txmgr run``, a webhook receiver and a recording HTTP proxy
in front of the daemon. No part of the API is mocked: every request the SDK
sends reaches the daemon (through the proxy, which only records, and, when a
test arms it, kills the daemon before relaying one answer).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.parse
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

#: Anvil's well-known dev keys (public test keys; ``tests/it/common/daemon.rs``).
DEV_KEYS: list[tuple[str, str]] = [
    (
        "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80",
        "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266",
    ),
    (
        "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d",
        "0x70997970c51812dc3a010c7d01b50e0d17dc79c8",
    ),
    (
        "0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a",
        "0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc",
    ),
]

#: A submitter paused in the configuration: its intents wait QUEUED.
PAUSED_SUBMITTER = DEV_KEYS[2][1]
#: Where transfers go (no account of ours).
SINK = "0x000000000000000000000000000000000000dead"
#: Where anvil_setCode puts a contract that always reverts (PUSH1 0 PUSH1 0 REVERT).
REVERTER = "0x00000000000000000000000000000000000fa11d"
REVERT_CODE = "0x60006000fd"


def required_env(name: str) -> str:
    """An environment variable the run cannot do without: absent is a
    failure, never a skip."""
    value = os.environ.get(name)
    if not value:
        raise RuntimeError(f"{name} is not set (clients/python/test.sh sets it)")
    return value


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def record_pid(pid: int) -> None:
    """Notes a child process for test.sh, which kills what is left of them
    if pytest itself is killed."""
    path = os.environ.get("TXMGR_PY_PIDS")
    if path:
        with open(path, "a") as pids:
            pids.write(f"{pid}\n")


def wait_until(what: str, check: Callable[[], bool], timeout: float, every: float = 0.1) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if check():
                return
        except Exception:  # noqa: BLE001 - not ready yet
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout} s")
        time.sleep(every)


# --- PostgreSQL -----------------------------------------------------------------


class Database:
    """A fresh database on the server of ``admin_url``, dropped by :meth:`drop`."""

    def __init__(self, admin_url: str) -> None:
        self.admin_url = admin_url
        # test.sh names it, to drop it even if pytest is killed.
        self.name = os.environ.get("TXMGR_PY_DB_NAME") or f"txmgr_py_{uuid.uuid4().hex[:12]}"
        parts = urllib.parse.urlsplit(admin_url)
        self.url = urllib.parse.urlunsplit(parts._replace(path="/" + self.name))
        self._psql(admin_url, f'CREATE DATABASE "{self.name}"')

    @staticmethod
    def _psql(url: str, sql: str) -> str:
        done = subprocess.run(
            ["psql", url, "-X", "-v", "ON_ERROR_STOP=1", "-Atc", sql],
            capture_output=True,
            text=True,
            timeout=60,
        )
        if done.returncode != 0:
            raise RuntimeError(f"psql {sql!r}: {done.stderr.strip()}")
        return done.stdout.strip()

    def query(self, sql: str) -> str:
        """One statement on the test database; its output (``-At``)."""
        return self._psql(self.url, sql)

    def drop(self) -> None:
        self._psql(self.admin_url, f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')


# --- anvil --------------------------------------------------------------------------


class Anvil:
    """anvil on a free loopback port, mining each transaction at once."""

    def __init__(self, binary: str, log_dir: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._log = open(log_dir / "anvil.log", "wb")  # noqa: SIM115
        self.process = subprocess.Popen(
            [binary, "--host", "127.0.0.1", "--port", str(self.port), "--chain-id", "31337", "--silent"],
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        record_pid(self.process.pid)
        wait_until("anvil answers", lambda: self.rpc("eth_chainId") == "0x7a69", 30)

    def rpc(self, method: str, *params: Any) -> Any:
        answer = httpx.post(
            self.url,
            json={"jsonrpc": "2.0", "id": 1, "method": method, "params": list(params)},
            timeout=5,
        ).json()
        if "error" in answer:
            raise RuntimeError(f"{method}: {answer['error']}")
        return answer["result"]

    def stop(self) -> None:
        self.process.kill()
        self.process.wait(10)
        self._log.close()


# --- the webhook receiver -------------------------------------------------------------


@dataclass
class Delivery:
    """One POST the daemon made to the receiver, exactly as received."""

    headers: dict[str, str]
    body: bytes
    received_at: float


class Receiver:
    """Records every webhook delivery (headers lower-cased, the raw body) and
    answers 204."""

    def __init__(self) -> None:
        self.deliveries: list[Delivery] = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length)
                headers = {key.lower(): value for key, value in self.headers.items()}
                with receiver.lock:
                    receiver.deliveries.append(Delivery(headers, body, time.time()))
                self.send_response(204)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/txmgr-events"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def for_tx(self, tx_id: str) -> list[Delivery]:
        with self.lock:
            return [d for d in self.deliveries if json.loads(d.body).get("tx_id") == tx_id]

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


# --- the daemon ---------------------------------------------------------------------------


def sha256_hex(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass
class Tokens:
    """Bearer tokens of the test daemon (random per run)."""

    client: str = field(default_factory=lambda: uuid.uuid4().hex + uuid.uuid4().hex)
    #: A client token with ``rate = { creates_per_second = 0.5, burst = 1 }``.
    slow: str = field(default_factory=lambda: uuid.uuid4().hex + uuid.uuid4().hex)


WEBHOOK_SECRET = "py-sdk-webhook-secret-" + uuid.uuid4().hex


def daemon_config(*, port: int, db_url: str, rpc_url: str, receiver_url: str, tokens: Tokens) -> str:
    submitters = "".join(
        f'[submitters."{address}"]\nsigner = {{ kind = "env", env = "PY_SDK_DEV_KEY_{i}" }}\n'
        + ("paused = true\n" if address == PAUSED_SUBMITTER else "")
        for i, (_, address) in enumerate(DEV_KEYS)
    )
    return f"""node_id = "py-sdk"
[database]
url = "{db_url}"
max_connections = 8
migrate_on_start = true
[http]
listen = "127.0.0.1:{port}"
request_timeout = "10s"
[chain]
rpc_url = "{rpc_url}"
chain_id = 31337
poll_interval = "200ms"
rpc_timeout = "2s"
sweep_interval = "1s"
[lease]
duration = "3s"
renew_interval = "1s"
clock_skew_allowance = "500ms"
[node]
heartbeat_interval = "500ms"
discovery_interval = "500ms"
[defaults]
finality = {{ confirmations = 1 }}
resubmit_interval = "2s"
[log]
level = "info"

[[auth.tokens]]
name = "app"
role = "client"
sha256 = "{sha256_hex(tokens.client)}"

[[auth.tokens]]
name = "slow"
role = "client"
sha256 = "{sha256_hex(tokens.slow)}"
rate = {{ creates_per_second = 0.5, burst = 1 }}

[[webhooks]]
name = "py-sdk"
url = "{receiver_url}"
secret_env = "PY_SDK_WEBHOOK_SECRET"
backoff_initial = "200ms"
backoff_max = "1s"

{submitters}"""


class Daemon:
    """``txmgr run`` with a fixed configuration; SIGKILL and restart keep it."""

    def __init__(self, binary: str, config: str, port: int, log_dir: Path) -> None:
        self.binary = binary
        self.port = port
        self.base = f"http://127.0.0.1:{port}"
        self.config_path = log_dir / "txmgr.toml"
        self.config_path.write_text(config)
        self.log_path = log_dir / "txmgr.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self) -> None:
        assert self.process is None, "already running"
        env = dict(os.environ)
        env["RUST_LOG"] = "info"
        env["PY_SDK_WEBHOOK_SECRET"] = WEBHOOK_SECRET
        for i, (key, _) in enumerate(DEV_KEYS):
            env[f"PY_SDK_DEV_KEY_{i}"] = key
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [self.binary, "run", "--config", str(self.config_path)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
            )
        record_pid(self.process.pid)
        self.starts += 1

    def ready(self, timeout: float = 60) -> None:
        def check() -> bool:
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"txmgr exited with {self.process.returncode}:\n{self.log_tail()}")
            return httpx.get(f"{self.base}/readyz", timeout=2).status_code == 200

        deadline = time.monotonic() + timeout
        while True:
            try:
                if check():
                    return
            except RuntimeError:
                raise
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"txmgr not ready within {timeout} s:\n{self.log_tail()}")
            time.sleep(0.1)

    def kill(self) -> None:
        """SIGKILL: a crash (no lease released, nothing flushed)."""
        if self.process is not None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)
            self.process = None

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
            self.process = None

    def log_tail(self, lines: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


# --- the recording proxy ------------------------------------------------------------------

_HOP = {
    "host",
    "connection",
    "keep-alive",
    "transfer-encoding",
    "content-length",
    "content-encoding",
    "accept-encoding",
    "te",
    "upgrade",
}


@dataclass
class Exchange:
    """One request through the proxy and what became of it."""

    method: str
    path: str
    body: bytes
    #: ``time.monotonic()`` when the proxy received it.
    sent_at: float = field(default_factory=time.monotonic)
    #: The daemon's status, ``None`` when it did not answer.
    status: int | None = None
    #: ``Retry-After`` of the answer, if any.
    retry_after: str | None = None
    #: The answer's body as the daemon sent it.
    answer: bytes = b""
    #: The answer was not relayed (the client saw the connection close).
    swallowed: bool = False


#: A hook for one armed request: called with the exchange (the daemon's answer
#: in it); the answer is then not relayed, the connection is closed instead.
Hook = Callable[[Exchange], None]


class Proxy:
    """An HTTP/1.1 proxy in front of the daemon that records every request.

    ``arm(method, path, hook)`` makes the next matching request run ``hook``
    after the daemon answered it, and close the client's connection instead
    of relaying the answer: the client never learns what happened.
    """

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.exchanges: list[Exchange] = []
        self.lock = threading.Lock()
        self._armed: list[tuple[str, str, Hook]] = []
        self._http = httpx.Client(timeout=httpx.Timeout(120.0), follow_redirects=False)
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # noqa: N802
                proxy._forward(self)

            def do_POST(self) -> None:  # noqa: N802
                proxy._forward(self)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def arm(self, method: str, path: str, hook: Hook) -> None:
        with self.lock:
            self._armed.append((method, path, hook))

    def _take_hook(self, method: str, path: str) -> Hook | None:
        with self.lock:
            for i, (m, p, hook) in enumerate(self._armed):
                if m == method and p == path:
                    del self._armed[i]
                    return hook
        return None

    def mark(self) -> int:
        """Position in the log; :meth:`since` reads what came after it."""
        with self.lock:
            return len(self.exchanges)

    def since(self, mark: int) -> list[Exchange]:
        with self.lock:
            return list(self.exchanges[mark:])

    def _forward(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("content-length") or 0)
        body = handler.rfile.read(length) if length else b""
        exchange = Exchange(handler.command, handler.path, body)
        with self.lock:
            self.exchanges.append(exchange)
        headers = {k: v for k, v in handler.headers.items() if k.lower() not in _HOP}
        try:
            answer = self._http.request(
                handler.command, self.upstream + handler.path, content=body, headers=headers
            )
        except httpx.TransportError:
            # The daemon is down: the client sees its connection closed.
            handler.close_connection = True
            return
        exchange.status = answer.status_code
        exchange.retry_after = answer.headers.get("retry-after")
        exchange.answer = answer.content
        hook = self._take_hook(handler.command, urllib.parse.urlsplit(handler.path).path)
        if hook is not None:
            exchange.swallowed = True
            hook(exchange)
            handler.close_connection = True
            return
        handler.send_response(answer.status_code)
        for key, value in answer.headers.items():
            if key.lower() not in _HOP:
                handler.send_header(key, value)
        handler.send_header("content-length", str(len(answer.content)))
        handler.end_headers()
        handler.wfile.write(answer.content)

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._http.close()


# --- the whole stack ------------------------------------------------------------------------


class Stack:
    """Database, anvil, receiver, daemon and proxy of one test session."""

    def __init__(self) -> None:
        binary = required_env("TXMGR_BIN")
        anvil_bin = required_env("ANVIL_BIN")
        admin_url = required_env("DATABASE_URL")
        for path in (binary, anvil_bin):
            if not os.access(path, os.X_OK):
                raise RuntimeError(f"{path} is not an executable")
        # Under test.sh's work directory when set (removed with it).
        self.dir = Path(tempfile.mkdtemp(prefix="txmgr-py-", dir=os.environ.get("TXMGR_PY_WORK")))
        self.tokens = Tokens()
        self.db: Database | None = None
        self.anvil: Anvil | None = None
        self.receiver: Receiver | None = None
        self.daemon: Daemon | None = None
        self.proxy: Proxy | None = None
        try:
            self.db = Database(admin_url)
            self.anvil = Anvil(anvil_bin, self.dir)
            self.receiver = Receiver()
            port = free_port()
            config = daemon_config(
                port=port,
                db_url=self.db.url,
                rpc_url=self.anvil.url,
                receiver_url=self.receiver.url,
                tokens=self.tokens,
            )
            self.daemon = Daemon(binary, config, port, self.dir)
            self.daemon.start()
            self.daemon.ready()
            self.proxy = Proxy(self.daemon.base)
        except BaseException:
            self.close()
            raise

    @property
    def submitter(self) -> str:
        return DEV_KEYS[0][1]

    def close(self) -> None:
        steps: list[Callable[[], object]] = []
        if self.proxy is not None:
            steps.append(self.proxy.stop)
        if self.daemon is not None:
            steps.append(self.daemon.stop)
        if self.receiver is not None:
            steps.append(self.receiver.stop)
        if self.anvil is not None:
            steps.append(self.anvil.stop)
        if self.db is not None:
            steps.append(self.db.drop)
        steps.append(lambda: shutil.rmtree(self.dir, ignore_errors=True))
        for step in steps:
            try:
                step()
            except Exception as err:  # noqa: BLE001 - clean up the rest anyway
                print(f"cleanup: {err}")
