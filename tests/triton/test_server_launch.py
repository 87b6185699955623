"""The launcher against the real tritonserver: start, answer, stop, and every way it can go wrong."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import sys
import sysconfig
import time
from pathlib import Path

import numpy as np
import pytest
from support.triton_repo_factory import group_alive, write_double_repository

from repo_builder.errors import UserError
from repo_builder.triton.locate import locate_tritonserver, server_environment
from repo_builder.triton.server import (
    ModelLoadError,
    ServerError,
    ServerOptions,
    TritonServer,
    port_in_use,
    start_server,
)

pytestmark = pytest.mark.triton


def test_shared_server_answers_on_loopback_when_started(shared_server: TritonServer) -> None:
    shared_server.load("double")
    out = shared_server.infer("double", {"INPUT0": np.arange(8, dtype=np.float32).reshape(2, 4)})
    assert np.array_equal(out["OUTPUT0"], np.arange(8, dtype=np.float32).reshape(2, 4) * 2)
    ports = {shared_server.grpc_port, shared_server.http_port, shared_server.metrics_port}
    assert len(ports) == 3 and all(port_in_use(p) for p in ports)
    assert shared_server.grpc_url.startswith("127.0.0.1:")


def test_python_stub_imports_environment_packages_when_model_needs_them(shared_server: TritonServer) -> None:
    shared_server.load("environment")
    paths = [p.decode() for p in shared_server.infer("environment", {})["PATHS"]]
    *modules, prefix, numpy_version = paths
    assert prefix == sys.prefix
    assert numpy_version.split(".")[0] == "1"
    for module_file in modules:
        assert Path(module_file).resolve().is_relative_to(Path(sys.prefix).resolve()), module_file


def test_shared_server_raises_model_load_error_when_model_unknown(shared_server: TritonServer) -> None:
    with pytest.raises(ModelLoadError, match="no_such_model"):
        shared_server.load("no_such_model")


def test_start_server_leaves_no_process_when_block_ends(tmp_path: Path) -> None:
    repo = write_double_repository(tmp_path / "repo")
    with start_server(repo, load_models=("pipeline",)) as server:
        pid, workdir, http_port = server.pid, server.workdir, server.http_port
        states = {(m.name, m.state) for m in server.models()}
        assert ("pipeline", "READY") in states and ("double", "READY") in states
    assert pid is not None and not group_alive(pid)
    assert workdir is not None and not workdir.exists()
    assert not port_in_use(http_port)


def test_start_server_leaves_no_process_when_block_raises(tmp_path: Path) -> None:
    repo = write_double_repository(tmp_path / "repo")
    pids: list[int] = []
    with pytest.raises(RuntimeError, match="boom"), start_server(repo) as server:
        server.load("double")
        assert server.pid is not None
        pids.append(server.pid)
        raise RuntimeError("boom")
    assert pids and not group_alive(pids[0])


def test_locate_tritonserver_raises_user_error_when_binary_missing(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no such file"):
        locate_tritonserver(tmp_path / "nowhere" / "tritonserver")


def test_start_server_raises_user_error_when_binary_missing(tmp_path: Path) -> None:
    with (
        pytest.raises(UserError, match="--tritonserver"),
        start_server(tmp_path, tritonserver=str(tmp_path / "x")),
    ):
        pass


def test_start_server_raises_user_error_when_port_in_use(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        expected = rf"--grpc-port {port}: the port is already in use"
        with pytest.raises(UserError, match=expected), start_server(tmp_path, grpc_port=port):
            pass


def test_check_alive_raises_server_error_when_server_dies_mid_run(tmp_path: Path) -> None:
    repo = write_double_repository(tmp_path / "repo")
    server = TritonServer(repo)
    with server:
        pid = server.pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        server.process.wait(timeout=10)  # type: ignore[union-attr]
        with pytest.raises(ServerError, match="killed by signal 9 while running") as info:
            server.check_alive()
        with pytest.raises(ServerError, match="killed by signal 9"):
            server.load("double")
    assert info.value.log_path is not None and info.value.log_path.exists()  # kept: the error names it
    assert str(info.value.log_path) in str(info.value)
    assert not group_alive(pid)
    shutil.rmtree(info.value.log_path.parent)  # the kept log has served its purpose here


def test_start_server_raises_after_timeout_when_remote_repository_hangs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    with socket.socket() as silent:  # accepts connections, never answers: an S3 endpoint that hangs
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        port = silent.getsockname()[1]
        server = TritonServer(f"s3://http://127.0.0.1:{port}/bucket/repo", ServerOptions(startup_timeout=4))
        started = time.monotonic()
        with pytest.raises(ServerError, match="did not answer within 4 s"):
            server.start()
        assert time.monotonic() - started < 30
    assert server.pid is not None and not group_alive(server.pid)
    assert server.log_path is not None and server.log_path.exists()  # kept: the error points at it
    shutil.rmtree(server.log_path.parent)


def test_server_environment_adds_libraries_and_libdir_when_bundled() -> None:
    install = locate_tritonserver(None)
    if not install.bundled:
        pytest.skip(reason="a tritonserver on PATH is used instead of the nvidia-pytriton one")
    env = server_environment(install, {"PATH": "/usr/bin"})
    libs = env["LD_LIBRARY_PATH"].split(os.pathsep)
    assert any(p.endswith("nvidia_pytriton.libs") for p in libs)
    assert sysconfig.get_config_var("LIBDIR") in libs
    assert env["PATH"].split(os.pathsep)[0] == str(Path(sys.exec_prefix) / "bin")


def test_locate_tritonserver_prefers_path_when_a_container_server_is_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "opt" / "tritonserver"
    (home / "bin").mkdir(parents=True)
    (home / "backends" / "onnxruntime").mkdir(parents=True)
    binary = home / "bin" / "tritonserver"
    binary.write_text("#!/bin/sh\nexit 0\n")
    binary.chmod(0o755)
    monkeypatch.setenv("PATH", f"{home / 'bin'}{os.pathsep}{os.environ['PATH']}")
    install = locate_tritonserver(None)
    assert install.binary == binary and not install.bundled
    assert install.backends == home / "backends" and install.stub is None


def test_locate_tritonserver_raises_user_error_when_stub_for_this_python_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from repo_builder.triton import locate

    root = tmp_path / "site-packages" / "pytriton"
    (root / "tritonserver" / "bin").mkdir(parents=True)
    (root / "tritonserver" / "bin" / "tritonserver").write_text("")
    (root / "tritonserver" / "python_backend_stubs" / "3.8").mkdir(parents=True)
    (root / "tritonserver" / "python_backend_stubs" / "3.8" / locate.STUB_NAME).write_text("")
    monkeypatch.setattr(locate, "_pytriton_root", lambda: root)
    monkeypatch.setenv("PATH", str(tmp_path))  # no tritonserver on PATH
    with pytest.raises(
        UserError, match=rf"no Python-backend stub for Python {locate.python_version()} \(it has 3.8\)"
    ):
        locate_tritonserver(None)


def test_server_arguments_pass_header_pattern_and_loopback_when_given(tmp_path: Path) -> None:
    server = TritonServer(tmp_path, ServerOptions(mode="poll", http_header_forward_pattern="x-nvcf-.*"))
    args = server.arguments()
    assert "--http-header-forward-pattern=x-nvcf-.*" in args
    assert {"--grpc-address=127.0.0.1", "--http-address=127.0.0.1", "--metrics-address=127.0.0.1"} <= set(
        args
    )
    assert "--model-control-mode=poll" in args and "--exit-on-error=false" in args
