"""Small repositories for the publish tests: a Python add-N model and an ensemble calling it."""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ADD_MODEL_PY = '''
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", x + {amount})]))
        return out
'''

STEP_CONFIG = '''name: "add"
backend: "python"
max_batch_size: 8
input [{ name: "INPUT0" data_type: TYPE_FP32 dims: [4] }]
output [{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [4] }]
instance_group [{ kind: KIND_CPU count: 1 }]
'''

ENSEMBLE_CONFIG = '''name: "pipeline"
platform: "ensemble"
max_batch_size: 8
input [{ name: "X" data_type: TYPE_FP32 dims: [4] }]
output [{ name: "Y" data_type: TYPE_FP32 dims: [4] }]
ensemble_scheduling { step [{ model_name: "add" model_version: -1
  input_map { key: "INPUT0" value: "X" } output_map { key: "OUTPUT0" value: "%s" } }]%s }
'''

# The ensemble after "a change that touches it": a second add step (the output passes through add twice).
ENSEMBLE_TWO_STEPS = '''name: "pipeline"
platform: "ensemble"
max_batch_size: 8
input [{ name: "X" data_type: TYPE_FP32 dims: [4] }]
output [{ name: "Y" data_type: TYPE_FP32 dims: [4] }]
ensemble_scheduling { step [
  { model_name: "add" model_version: -1 input_map { key: "INPUT0" value: "X" } output_map { key: "OUTPUT0" value: "mid" } },
  { model_name: "add" model_version: -1 input_map { key: "INPUT0" value: "mid" } output_map { key: "OUTPUT0" value: "Y" } }
] }
'''

PLACEHOLDER = "keeps the ensemble's version folder in object stores\n"


def write_repository(root: Path, amount: int = 1, version: int = 1, ensemble: str | None = None) -> Path:
    """``add`` (version ``version`` adds ``amount``), its labels, and ``pipeline`` (an ensemble) in ``root``."""
    add = root / "add"
    (add / str(version)).mkdir(parents=True, exist_ok=True)
    (add / "config.pbtxt").write_text(STEP_CONFIG)
    (add / "labels.txt").write_text("a\nb\nc\nd\n")
    (add / str(version) / "model.py").write_text(ADD_MODEL_PY.format(amount=float(amount)))
    pipeline = root / "pipeline"
    (pipeline / "1").mkdir(parents=True, exist_ok=True)
    (pipeline / "config.pbtxt").write_text(ensemble or ENSEMBLE_CONFIG % ("Y", ""))
    (pipeline / "1" / "placeholder.txt").write_text(PLACEHOLDER)
    return root


def tree_digest(root: Path) -> dict[str, str]:
    """relative path -> sha256 of every file below ``root`` (the byte-for-byte comparison)."""
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}


@contextlib.contextmanager
def moto_s3_server() -> Iterator[str]:
    """``http://127.0.0.1:PORT`` of a real S3 API (moto's server) with dummy credentials in the environment
    (and no endpoint variables), all restored on exit. Skips the test when the remote extra is missing."""
    pytest.importorskip("s3fs", reason="the remote extra is not installed")
    moto_server = pytest.importorskip("moto.server", reason="moto[server] is not installed")
    saved = {k: os.environ.get(k) for k in (*CREDENTIALS, "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3")}
    os.environ.update(CREDENTIALS)
    for k in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        os.environ.pop(k, None)
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # one line per request otherwise
    port = free_port()
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


class FlakyProxy:
    """A TCP proxy on loopback that closes its first ``drop`` connections at once, then forwards: a real
    network failure between the client and the S3 server, for the retry tests."""

    def __init__(self, target_port: int, drop: int) -> None:
        import threading

        self.target_port = target_port
        self.drop = drop
        self.dropped = 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        import threading

        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            if self.dropped < self.drop:
                self.dropped += 1
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                conn.close()  # RST: "connection reset by peer"
                continue
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            for a, b in ((conn, upstream), (upstream, conn)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self.listener.close()


# -- fixtures: moto's S3 server, shared by the publish and store tests (their conftests import these) ----
@pytest.fixture(scope="session")
def s3_server() -> Iterator[str]:
    """``http://127.0.0.1:PORT`` of a real S3 API (moto's server) with dummy credentials in the environment."""
    with moto_s3_server() as endpoint:
        yield endpoint


@pytest.fixture
def s3_client(s3_server: str) -> Any:
    import boto3  # heavy, and only with the remote extra

    return boto3.client("s3", endpoint_url=s3_server)


@pytest.fixture
def bucket(s3_client: Any) -> str:
    """A new, empty bucket for one test."""
    name = f"b{uuid.uuid4().hex[:12]}"
    s3_client.create_bucket(Bucket=name)
    return name
