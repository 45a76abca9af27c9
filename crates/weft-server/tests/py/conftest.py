"""Fixtures: a real `weft serve` process on a free loopback port.

The binary is $WEFT_BIN, or target/release/weft under $CARGO_TARGET_DIR
(or the repository's target/); build it first with
`cargo build --release -p weft-cli`. See run.sh.
"""
import os
import pathlib
import signal
import socket
import subprocess
import tempfile
import time

import pytest
import redis

REPO = pathlib.Path(__file__).resolve().parents[4]


def weft_bin():
    if os.environ.get("WEFT_BIN"):
        return os.environ["WEFT_BIN"]
    target = os.environ.get("CARGO_TARGET_DIR", str(REPO / "target"))
    return str(pathlib.Path(target) / "release" / "weft")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, *flags):
        self.dir = tempfile.TemporaryDirectory(prefix="weft-py-")
        self.port = free_port()
        self.proc = subprocess.Popen(
            [weft_bin(), "serve", "--port", str(self.port), "--dir",
             os.path.join(self.dir.name, "db"), "--threads", "2", *flags],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        assert line.startswith("listening on"), (line, self.proc.stderr.read())

    def client(self, **kw):
        return redis.Redis(host="127.0.0.1", port=self.port,
                           socket_timeout=20, **kw)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc.stdout.close()
        self.proc.stderr.close()
        self.dir.cleanup()


@pytest.fixture
def server():
    s = Server()
    yield s
    s.stop()


@pytest.fixture
def server_with_password():
    s = Server("--requirepass", "py-secret")
    yield s
    s.stop()


def eventually(what, f, timeout=10.0):
    deadline = time.time() + timeout
    while not f():
        assert time.time() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)
