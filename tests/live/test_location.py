"""``live/location.py``: ``--live``'s settings from the flags, and the offline judgment followed by the server's,
through the Python API too (``repo_builder.validate(..., live=True)``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.triton_repo_factory import write_double_repository

import repo_builder
from repo_builder.errors import UserError
from repo_builder.live.location import live_settings, live_target
from repo_builder.validate.records import ValidateOptions


def test_live_settings_parse_input_files_when_given(tmp_path: Path) -> None:
    photo = tmp_path / "photo.jpg"
    photo.write_bytes(b"\xff\xd8")
    settings = live_settings(None, 30.0, True, False, None, ("clf:IMAGE=" + str(photo),))
    assert (settings.inputs[0].model, settings.inputs[0].name, settings.inputs[0].path) == ("clf", "IMAGE", photo)
    assert settings.strict and settings.load_timeout == 30.0


def test_live_settings_refuse_an_input_that_is_not_a_file_when_given(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="is not a file"):
        live_settings(None, 30.0, False, False, None, (f"IMAGE={tmp_path / 'missing.jpg'}",))


def test_live_target_names_the_deploy_target_and_the_server_when_live() -> None:
    target = live_target(ValidateOptions(gpu_present=False), live_settings("/opt/tritonserver", 60.0, False, False, None))
    assert target.startswith(ValidateOptions(gpu_present=False).target) and target.endswith("with /opt/tritonserver")


@pytest.mark.triton
@pytest.mark.slow
def test_python_api_validate_loads_every_model_when_live_is_true(tmp_path: Path) -> None:
    repo = write_double_repository(tmp_path / "repo")
    offline = repo_builder.validate(repo, gpu=False)
    report = repo_builder.validate(repo, gpu=False, live=True, load_timeout=30)
    assert all(m.live is None for m in offline.models)
    assert report.ok and report.models and all(m.live is not None and m.live.loaded for m in report.models)
    assert "live on this machine" in report.target
