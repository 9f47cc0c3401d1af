"""Debian's nginx (installed by .ci/run when missing) running the repo's
deploy/nginx/agentsite.conf.template — the file docker-compose mounts into
the official image — in front of a test server. Only the two template
variables differ: the upstream and the port to listen on. `tls_in_front`
puts a TLS terminator before that (a self-signed certificate made for the
test), configured as docs/operations.md ("HTTPS") asks of one."""

from __future__ import annotations

import atexit
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from tests.system.server import ROOT, free_port

TEMPLATE = ROOT / "deploy" / "nginx" / "agentsite.conf.template"
NGINX_PATHS = ("/usr/sbin/nginx",)

# Debian's /etc/nginx/nginx.conf, cut to what a test needs; the official
# image's is the same shape (conf.d files are included inside `http {}`).
MAIN = """\
worker_processes 1;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log info;
events {{ worker_connections 256; }}
http {{
    include /etc/nginx/mime.types;
    default_type application/octet-stream;
    access_log {tmp}/access.log;
    client_body_temp_path {tmp}/body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    include {tmp}/agentsite.conf;
}}
"""


def nginx_binary() -> str:
    found = shutil.which("nginx") or next((p for p in NGINX_PATHS if Path(p).exists()), None)
    if found is None:
        pytest.fail("nginx is missing: install Debian's nginx (apt-get install -y nginx; .ci/run does this)")
    return found


def render(upstream: str, listen: str) -> str:
    text = TEMPLATE.read_text()
    # The official image's envsubst fills in only variables that are set.
    for name, value in {"AGENTSITE_UPSTREAM": upstream, "AGENTSITE_LISTEN": listen}.items():
        text = text.replace("${" + name + "}", value)
    assert "${" not in text, "the template grew a variable this test does not set"
    return text


# What docs/operations.md ("HTTPS") asks of a TLS terminator in front of the
# template's nginx: the Host header as the browser sent it, and the scheme.
TLS_FRONT = """\
server {{
    listen 127.0.0.1:{port} ssl;
    ssl_certificate {tmp}/cert.pem;
    ssl_certificate_key {tmp}/key.pem;
    location / {{
        proxy_pass http://127.0.0.1:{upstream_port};
        proxy_set_header Host $http_host;
        proxy_set_header X-Forwarded-Proto https;
    }}
}}
"""


def self_signed_certificate(directory: Path) -> Path:
    """cert.pem and key.pem for 127.0.0.1 in `directory`; the certificate's path."""
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
            "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
            "-keyout", str(directory / "key.pem"), "-out", str(directory / "cert.pem"),
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return directory / "cert.pem"


class Nginx:
    def __init__(self, workdir: Path, upstream_port: int, *, tls: bool = False) -> None:
        self.dir = workdir
        self.dir.mkdir(parents=True, exist_ok=True)
        for sub in ("body", "proxy", "fastcgi", "uwsgi", "scgi"):
            (self.dir / sub).mkdir(exist_ok=True)
            # Workers of an nginx started as root run as an unprivileged user.
            os.chmod(self.dir / sub, 0o777)
        self.port = free_port()
        self.scheme = "https" if tls else "http"
        self.certificate: Path | None = None
        if tls:
            self.certificate = self_signed_certificate(self.dir)
            conf = TLS_FRONT.format(port=self.port, tmp=self.dir, upstream_port=upstream_port)
        else:
            conf = render(f"127.0.0.1:{upstream_port}", f"127.0.0.1:{self.port}")
        (self.dir / "agentsite.conf").write_text(conf)
        (self.dir / "nginx.conf").write_text(MAIN.format(tmp=self.dir))
        self.process: subprocess.Popen | None = None
        atexit.register(self.stop)

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}"

    def start(self) -> Nginx:
        binary = nginx_binary()
        check = subprocess.run(
            [binary, "-t", "-p", str(self.dir), "-c", str(self.dir / "nginx.conf")],
            capture_output=True,
            text=True,
        )
        assert check.returncode == 0, check.stderr
        self.process = subprocess.Popen(
            [binary, "-p", str(self.dir), "-c", str(self.dir / "nginx.conf"), "-g", "daemon off;"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return self
            except OSError:
                if self.process.poll() is not None:
                    raise RuntimeError(f"nginx exited: {self.process.stderr.read().decode()}") from None
                time.sleep(0.05)
        raise RuntimeError("nginx did not listen within 10 s")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()  # nginx: fast shutdown on SIGTERM
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)

    def error_log(self) -> str:
        path = self.dir / "error.log"
        return path.read_text(errors="replace") if path.exists() else ""


@pytest.fixture
def nginx_in_front(tmp_path):
    """`nginx_in_front(server_or_port)` starts the template's nginx proxying to
    it; `nginx_in_front(that_nginx, tls=True)` a TLS terminator before it."""
    started: list[Nginx] = []

    def start(upstream, *, tls: bool = False) -> Nginx:
        port = upstream if isinstance(upstream, int) else upstream.port
        proxy = Nginx(tmp_path / f"nginx-{len(started)}", port, tls=tls)
        started.append(proxy)
        return proxy.start()

    yield start
    for proxy in started:
        proxy.stop()
