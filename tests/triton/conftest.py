"""A real tritonserver shared by the tests of this folder (explicit mode, loopback, free ports)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.triton_repo_factory import (
    ENVIRONMENT_MODEL_PY,
    Tensor,
    write_double_repository,
    write_python_model,
)

from repo_builder.triton.server import TritonServer, start_server


@pytest.fixture(scope="session")
def shared_repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = write_double_repository(tmp_path_factory.mktemp("shared") / "repo")
    write_python_model(
        root,
        "environment",
        inputs=(),
        outputs=(Tensor("PATHS", "TYPE_STRING", (-1,)),),
        model_py=ENVIRONMENT_MODEL_PY,
    )
    return root


@pytest.fixture(scope="session")
def shared_server(shared_repository: Path) -> Iterator[TritonServer]:
    with start_server(shared_repository, mode="explicit") as server:
        yield server
