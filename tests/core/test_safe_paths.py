"""safe_paths.py and redact.py on their own: the path-safety rule every local write goes through, and the
credential mask every printed line goes through (issue 20)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from repo_builder.cli.main import one_line
from repo_builder.errors import UserError
from repo_builder.fsutil import prepare_out_dir
from repo_builder.redact import redact
from repo_builder.repository.stage import build_stage
from repo_builder.safe_paths import ReportWrite, inside, key_problem, refuse_system_folder, report_write


@pytest.mark.parametrize("key", ["/etc/passwd", "a//b", "a/../../b", "..", "./a", "a/./b", "", "a\x00b", "a/"])
def test_key_problem_refuses_key_when_it_is_not_plain_relative(key: str) -> None:
    assert key_problem(key) is not None


@pytest.mark.parametrize("key", ["m/config.pbtxt", "m/1/model.onnx", "a b/c@d/e:f", ".hidden/x", "a\\b"])
def test_key_problem_accepts_key_when_plain_relative(key: str) -> None:
    assert key_problem(key) is None


def test_inside_refuses_path_when_parent_links_out(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "out").symlink_to(tmp_path)
    with pytest.raises(ValueError, match="link"):
        inside(root, "out/victim.txt")
    assert inside(root, "m/1/x") == root / "m" / "1" / "x"


@pytest.mark.parametrize("folder", ["/", "~", "/.", "~/"])
def test_refuse_system_folder_raises_when_folder_is_root_or_home(folder: str) -> None:
    with pytest.raises(UserError, match=r"root|home"):
        refuse_system_folder(Path(os.path.expanduser(folder)), "--out")


def test_refuse_system_folder_raises_when_link_points_to_home(tmp_path: Path) -> None:
    (tmp_path / "h").symlink_to(Path.home())
    with pytest.raises(UserError, match="home"):
        refuse_system_folder(tmp_path / "h", "--out")
    refuse_system_folder(tmp_path / "new", "--out")  # an ordinary folder passes


@pytest.mark.parametrize("folder", ["/", "~"])
def test_out_folder_refused_when_it_is_root_or_home(folder: str) -> None:
    out = Path(os.path.expanduser(folder))
    with pytest.raises(UserError):
        prepare_out_dir(out)
    with pytest.raises(UserError), build_stage(out):
        pass


def test_report_write_decides_by_file_kind(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    (tmp_path / "link").symlink_to(tmp_path / "file")
    os.mkfifo(tmp_path / "fifo")
    assert report_write(tmp_path / "new.json", "--output") is ReportWrite.ATOMIC
    assert report_write(tmp_path / "file", "--output") is ReportWrite.ATOMIC
    assert report_write(Path("/dev/stderr"), "--output") is ReportWrite.IN_PLACE
    for name in ("link", "fifo"):
        with pytest.raises(UserError, match="--output"):
            report_write(tmp_path / name, "--output")


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("s3://user:SECRET1@bucket/prefix: not valid", "SECRET1"),
        ("GET https://AKIAXX:SECRET2@host:9000/b/k failed", "SECRET2"),
        ("https://b.s3.amazonaws.com/k?X-Amz-Credential=AKIA%2FSECRET3&X-Amz-Signature=SECRET4", "SECRET3"),
        ("https://b.s3.amazonaws.com/k?X-Amz-Credential=AKIA&X-Amz-Signature=SECRET4&x=1", "SECRET4"),
        ("https://acct.blob.core.windows.net/c/k?sv=2020&sig=SECRET5", "SECRET5"),
        ("https://storage.googleapis.com/b/k?X-Goog-Signature=SECRET6", "SECRET6"),
    ],
)
def test_redact_masks_secret_when_url_carries_it(text: str, secret: str) -> None:
    shown = redact(text)
    assert secret not in shown and "***" in shown
    assert redact(shown) == shown


def test_redact_keeps_text_when_nothing_is_secret() -> None:
    text = "s3://bucket/models/a@b/config.pbtxt: missing; https://host:9000/x?versionId=3"
    assert redact(text) == text


def test_one_line_escapes_controls_when_message_quotes_hostile_name() -> None:
    shown = one_line("x\n::warning file=a::owned\r\x1b[2J\x07\u202eevil\x00 s3://u:SECRET@b/k")
    assert "\n" not in shown and "\r" not in shown and "\x1b" not in shown and "\u202e" not in shown
    assert "\\n::warning" in shown and "\\u202e" in shown and "SECRET" not in shown


def test_error_line_never_starts_a_workflow_command_when_path_holds_newline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from repo_builder.cli.main import main

    assert main(["validate", str(tmp_path / "missing\n::error::injected")]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and not any(line.startswith("::") for line in err.splitlines())
