"""Real Redis and nginx processes on loopback for the team-gateway tests.

Both come from Debian packages (``redis-server``, ``nginx``; ``.ci/run`` installs them when
apt is usable). :func:`missing_packages` names the ones that are not installed, so a test can
skip with that reason instead of passing silently.
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

NGINX_PATHS = ("/usr/sbin/nginx", "/usr/bin/nginx")


def nginx_binary() -> str | None:
    found = shutil.which("nginx")
    return found or next((p for p in NGINX_PATHS if Path(p).exists()), None)


def missing_packages(*, nginx: bool = False) -> list[str]:
    missing = [] if shutil.which("redis-server") else ["redis-server"]
    if nginx and nginx_binary() is None:
        missing.append("nginx")
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


@dataclass
class RedisServer:
    """A ``redis-server`` without persistence; :meth:`stop` and :meth:`start` keep its port."""

    directory: Path
    port: int
    process: subprocess.Popen[bytes] | None = None

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
                "no",
                "--dir",
                str(self.directory),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for_port(self.port)

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
def redis_server(directory: Path) -> Iterator[RedisServer]:
    directory.mkdir(parents=True, exist_ok=True)
    server = RedisServer(directory, free_port())
    server.start()
    try:
        yield server
    finally:
        server.stop()


@dataclass
class Nginx:
    """nginx balancing ``/`` over gateway replicas; :meth:`set_upstreams` reloads it."""

    prefix: Path
    port: int
    process: subprocess.Popen[bytes] | None = None

    @property
    def conf(self) -> Path:
        return self.prefix / "nginx.conf"

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
            # A replica that is gone: the request goes to the next (requests are stateless).
            proxy_next_upstream error timeout http_502 http_503 non_idempotent;
            proxy_next_upstream_tries 3;
            proxy_connect_timeout 1s;
        }}
    }}
}}
"""
        )

    def start(self, upstreams: Sequence[int]) -> None:
        binary = nginx_binary()
        assert binary is not None
        self.write_conf(upstreams)
        self.process = subprocess.Popen(
            [binary, "-p", str(self.prefix), "-c", str(self.conf), "-e", "stderr"],
            stdout=subprocess.DEVNULL,
            stderr=(self.prefix / "nginx.stderr").open("wb"),
        )
        wait_for_port(self.port)

    def set_upstreams(self, upstreams: Sequence[int]) -> None:
        assert self.process is not None
        self.write_conf(upstreams)
        self.process.send_signal(signal.SIGHUP)
        time.sleep(0.3)  # the new workers take over

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGQUIT)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@contextmanager
def nginx(prefix: Path, upstreams: Sequence[int]) -> Iterator[Nginx]:
    prefix.mkdir(parents=True, exist_ok=True)
    balancer = Nginx(prefix, free_port())
    balancer.start(upstreams)
    try:
        yield balancer
    finally:
        balancer.stop()
