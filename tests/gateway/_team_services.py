"""Real Redis, nginx and haproxy processes on loopback for the team-gateway tests.

They come from Debian packages (``redis-server``, ``nginx``, ``haproxy``; ``.ci/run`` installs
them when apt is usable). :func:`missing_packages` names the ones that are not installed, so a
test can skip with that reason instead of passing silently. The balancers' retry settings are
those of the shipped examples (``examples/team-gateway/``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, TypeVar

import psutil

PI_MCP = Path(sys.executable).parent / "pi-mcp"
NGINX_PATHS = ("/usr/sbin/nginx", "/usr/bin/nginx")
HAPROXY_PATHS = ("/usr/sbin/haproxy", "/usr/bin/haproxy")


def nginx_binary() -> str | None:
    found = shutil.which("nginx")
    return found or next((p for p in NGINX_PATHS if Path(p).exists()), None)


def haproxy_binary() -> str | None:
    found = shutil.which("haproxy")
    return found or next((p for p in HAPROXY_PATHS if Path(p).exists()), None)


def missing_packages(*, nginx: bool = False, haproxy: bool = False) -> list[str]:
    missing = [] if shutil.which("redis-server") else ["redis-server"]
    if nginx and nginx_binary() is None:
        missing.append("nginx")
    if haproxy and haproxy_binary() is None:
        missing.append("haproxy")
    return missing


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_port(port: int, *, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise TimeoutError(f"nothing listens on 127.0.0.1:{port}") from None
            time.sleep(0.02)


def _listens_on(process: subprocess.Popen[bytes], port: int, timeout_s: float = 10.0) -> bool:
    """Whether ``process`` (or a child of it: nginx's master, haproxy's worker) comes to
    listen on ``port`` before it exits or ``timeout_s`` passes."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and process.poll() is None:
        with contextlib.suppress(psutil.Error):
            parent = psutil.Process(process.pid)
            for each in (parent, *parent.children(recursive=True)):
                for connection in each.net_connections(kind="tcp"):
                    if connection.status == psutil.CONN_LISTEN and connection.laddr.port == port:
                        return True
        time.sleep(0.02)
    return False


@dataclass
class RedisServer:
    """A ``redis-server``, without persistence unless ``appendonly``; :meth:`stop` and
    :meth:`start` keep its port (and, with ``appendonly``, its data). ``extra_args`` are more
    configuration lines (``--rename-command CONFIG ""``)."""

    directory: Path
    port: int
    process: subprocess.Popen[bytes] | None = None
    appendonly: bool = False
    extra_args: Sequence[str] = ()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.process = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "yes" if self.appendonly else "no",
                "--dir",
                str(self.directory),
                *self.extra_args,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for_port(self.port)

    def restart(self) -> None:
        """Stop and start again on the same port (empty, unless ``appendonly``)."""
        self.stop()
        self.start()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)  # a paused server cannot act on SIGTERM
            self.process.terminate()
            self.process.wait(timeout=10)
        self.process = None

    def pause(self) -> None:
        """Unreachable but keeping its data, as behind a network partition (SIGSTOP)."""
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)


@contextmanager
def redis_server(
    directory: Path, *, appendonly: bool = False, extra_args: Sequence[str] = ()
) -> Iterator[RedisServer]:
    directory.mkdir(parents=True, exist_ok=True)
    server = RedisServer(
        directory, free_port(), appendonly=appendonly, extra_args=tuple(extra_args)
    )
    server.start()
    try:
        yield server
    finally:
        server.stop()


@contextmanager
def team_redis(directory: Path, *, activate: bool = True) -> Iterator[RedisServer]:
    """A real ``redis-server`` for a test's shared state (made this process's team state with
    ``activate``; the shared state is let go after, either way); the test skips, naming the
    package, where ``redis-server`` is not installed."""
    import pytest

    from pi_mcp_adapter import _shared_state as shared_state

    if missing_packages():
        names = ", ".join(missing_packages())
        pytest.skip(f"needs the Debian package(s) {names} (.ci/run installs them)")
    with redis_server(directory) as server:
        if activate:
            shared_state.activate(server.url, environ={})
        try:
            yield server
        finally:
            shared_state.deactivate()


@dataclass
class Balancer:
    """A load balancer process on ``port`` in front of gateway replicas, its files under
    ``prefix``: each kind writes its configuration and names its command; starting, stopping
    and the stderr file are the same for all."""

    prefix: Path
    port: int
    process: subprocess.Popen[bytes] | None = None
    kind: ClassVar[str]
    conf_name: ClassVar[str]
    stop_signal: ClassVar[signal.Signals]
    """The signal that ends it gracefully (requests in flight are answered)."""

    @property
    def conf(self) -> Path:
        return self.prefix / self.conf_name

    def write_conf(self, upstreams: Sequence[int]) -> None:
        raise NotImplementedError

    def command(self) -> list[str]:
        raise NotImplementedError

    def start(self, upstreams: Sequence[int]) -> None:
        # A port free a moment ago may be taken by another process before the balancer binds
        # it (tests of other files run beside this one): then the balancer exits and the port
        # answers for someone else. It is ours only once our process listens on it.
        for _attempt in range(3):
            self.write_conf(upstreams)
            self.process = subprocess.Popen(
                self.command(),
                stdout=subprocess.DEVNULL,
                stderr=(self.prefix / f"{self.kind}.stderr").open("wb"),
            )
            if _listens_on(self.process, self.port):
                return
            self.stop()
            self.port = free_port()
        raise RuntimeError(f"{self.kind} did not start: see {self.prefix / self.kind}.stderr")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(self.stop_signal)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


_B = TypeVar("_B", bound=Balancer)


@contextmanager
def _balancing(kind: type[_B], prefix: Path, upstreams: Sequence[int]) -> Iterator[_B]:
    prefix.mkdir(parents=True, exist_ok=True)
    balancer = kind(prefix, free_port())
    balancer.start(upstreams)
    try:
        yield balancer
    finally:
        balancer.stop()


@dataclass
class Nginx(Balancer):
    """nginx balancing ``/`` over gateway replicas; :meth:`set_upstreams` reloads it."""

    kind: ClassVar[str] = "nginx"
    conf_name: ClassVar[str] = "nginx.conf"
    stop_signal: ClassVar[signal.Signals] = signal.SIGQUIT

    def write_conf(self, upstreams: Sequence[int]) -> None:
        servers = "\n".join(
            f"        server 127.0.0.1:{p} max_fails=1 fail_timeout=2s;" for p in upstreams
        )
        self.conf.write_text(
            f"""daemon off;
worker_processes 1;
pid {self.prefix}/nginx.pid;
error_log {self.prefix}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {self.prefix}/body;
    proxy_temp_path {self.prefix}/proxy;
    fastcgi_temp_path {self.prefix}/fastcgi;
    uwsgi_temp_path {self.prefix}/uwsgi;
    scgi_temp_path {self.prefix}/scgi;
    upstream gateway {{
{servers}
        keepalive 64;
    }}
    server {{
        listen 127.0.0.1:{self.port};
        location / {{
            proxy_pass http://gateway;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            # The replicas check Host against loopback (DNS-rebinding protection).
            proxy_set_header Host 127.0.0.1:{self.port};
            proxy_buffering off;
            proxy_read_timeout 300s;
            # One id per client request, the same on every retry: the replicas recognise a
            # replay by it (examples/team-gateway/nginx.conf).
            proxy_set_header X-Request-Id $request_id;
            # A replica that is gone: the request goes to the next, POST too; the replicas
            # run a replayed call again only when the tool is safe to repeat.
            proxy_next_upstream error timeout http_502 http_503 non_idempotent;
            proxy_next_upstream_tries 3;
            proxy_connect_timeout 1s;
        }}
    }}
}}
"""
        )

    def command(self) -> list[str]:
        binary = nginx_binary()
        assert binary is not None
        return [binary, "-p", str(self.prefix), "-c", str(self.conf), "-e", "stderr"]

    def set_upstreams(self, upstreams: Sequence[int]) -> None:
        assert self.process is not None
        self.write_conf(upstreams)
        self.process.send_signal(signal.SIGHUP)
        time.sleep(0.3)  # the new workers take over


def nginx(prefix: Path, upstreams: Sequence[int]) -> AbstractContextManager[Nginx]:
    return _balancing(Nginx, prefix, upstreams)


@dataclass
class HAProxy(Balancer):
    """haproxy balancing over gateway replicas with the retry settings of
    ``examples/team-gateway/haproxy.cfg``."""

    kind: ClassVar[str] = "haproxy"
    conf_name: ClassVar[str] = "haproxy.cfg"
    stop_signal: ClassVar[signal.Signals] = signal.SIGTERM

    def write_conf(self, upstreams: Sequence[int]) -> None:
        servers = "\n".join(
            f"    server replica{i} 127.0.0.1:{p} check inter 1s fall 1 rise 2"
            for i, p in enumerate(upstreams)
        )
        self.conf.write_text(
            f"""global
    maxconn 1024
    tune.bufsize 65536
    log stderr format raw local0 info
defaults
    mode http
    log global
    option httplog
    timeout connect 1s
    timeout client 300s
    timeout server 300s
    retries 3
    option redispatch 1
    option http-buffer-request
    retry-on conn-failure empty-response 502 503
frontend gateway
    bind 127.0.0.1:{self.port}
    unique-id-format %{{+X}}o%ci:%cp_%fi:%fp_%Ts_%rt:%pid
    http-request set-header X-Request-Id %[unique-id]
    http-request set-header Host 127.0.0.1:{self.port}
    default_backend replicas
backend replicas
    balance roundrobin
{servers}
"""
        )

    def command(self) -> list[str]:
        binary = haproxy_binary()
        assert binary is not None
        return [binary, "-db", "-f", str(self.conf)]


def haproxy(prefix: Path, upstreams: Sequence[int]) -> AbstractContextManager[HAProxy]:
    return _balancing(HAProxy, prefix, upstreams)


@dataclass
class GatewayReplica:
    """One ``pi-mcp serve --transport http --stateless`` process with an agent dir of its own
    (as on a machine of its own)."""

    name: str
    agent_dir: Path
    port: int
    process: subprocess.Popen[bytes]
    stderr_path: Path
    started_at: float
    """``time.monotonic()`` just before the process was started."""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def descendant_pids(self) -> set[int]:
        try:
            return {p.pid for p in psutil.Process(self.process.pid).children(recursive=True)}
        except psutil.NoSuchProcess:
            return set()

    def kill(self) -> None:
        """As a crashed machine: SIGKILL to it and every process it started."""
        try:
            processes = psutil.Process(self.process.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            processes = []
        self.process.kill()
        self.process.wait()
        for child in processes:
            try:
                child.kill()
            except psutil.NoSuchProcess:
                continue

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")


@dataclass
class GatewayReplicas:
    """Replicas of one configuration file; :meth:`stop_all` ends those still running."""

    root: Path
    config: Path
    env: Mapping[str, str] = field(default_factory=dict)
    replicas: list[GatewayReplica] = field(default_factory=list)

    def start(self, name: str) -> GatewayReplica:
        agent_dir = self.root / name
        agent_dir.mkdir()
        stderr_path = self.root / f"{name}.stderr"
        args = ["--config", str(self.config), "--agent-dir", str(agent_dir)]
        args += ["--project", str(self.root), "serve", "--transport", "http", "--stateless"]
        # As for balancers: the port is ours only once our own process listens on it.
        for _attempt in range(3):
            port = free_port()
            started_at = time.monotonic()
            process = subprocess.Popen(
                [str(PI_MCP), *args, "--port", str(port)],
                stdout=subprocess.DEVNULL,
                stderr=stderr_path.open("wb"),
                cwd=self.root,
                env={**os.environ, **self.env},
                start_new_session=True,
            )
            if _listens_on(process, port, timeout_s=30):
                break
            if process.poll() is None:
                process.kill()
            process.wait()
        else:
            raise RuntimeError(f"replica {name} did not start: see {stderr_path}")
        replica = GatewayReplica(name, agent_dir, port, process, stderr_path, started_at)
        self.replicas.append(replica)
        return replica

    def stop_all(self) -> None:
        for replica in self.replicas:
            if replica.process.poll() is None:
                replica.process.send_signal(signal.SIGTERM)
        for replica in self.replicas:
            try:
                replica.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                replica.kill()


@contextmanager
def gateway_replicas(
    root: Path, config: Path, env: Mapping[str, str] | None = None
) -> Iterator[GatewayReplicas]:
    crew = GatewayReplicas(root, config, dict(env or {}))
    try:
        yield crew
    finally:
        crew.stop_all()


GATEWAY_CLIENT_CAPABILITIES = ("elicitation", "sampling")
"""What a gateway replica tells servers it can do (it relays questions and sampling to its
clients); cache entries it lists say so, and only a host that can do as much uses them."""


def tools_a_joining_replica_knows(config: Path, agent_dir: Path, server: str) -> int:
    """How many of ``server``'s tools a replica joining with ``agent_dir`` (empty) knows from
    the shared cache before it connects anything, read as a gateway reads it."""
    from pi_mcp_adapter import _shared_state as shared_state
    from pi_mcp_adapter.catalog import MetadataCache
    from pi_mcp_adapter.config import load_config

    agent_dir.mkdir(parents=True, exist_ok=True)
    loaded = load_config(agent_dir=agent_dir, project_dir=agent_dir, config_path=config)
    shared_state.activate(loaded.settings.shared_state, environ={})
    try:
        cache = MetadataCache(
            agent_dir / "mcp-cache.json", client_capabilities=GATEWAY_CLIENT_CAPABILITIES
        )
        metadata = cache.get(server, loaded.servers[server])
        return 0 if metadata is None else len(metadata.tools)
    finally:
        shared_state.deactivate()
