"""The scan records which entries are symlinks (``FileEntry.link``), and the ONNX rules trust a link-free
listing instead of ``lstat``-ing each part of the path again (issue 38: validate's speed). A link anywhere
on the way still sends the path through the full check: a graph that leaves its model folder is refused
whether the file or its version folder is the link, and whether or not the graph was read before."""

from __future__ import annotations

import os
from pathlib import Path

from support.validate_repo_helpers import make_model, messages, onnx_bytes, validate

from repo_builder.validate.scan import scan_repository

ONNX_CONFIG = '''name: "m"
backend: "onnxruntime"
max_batch_size: 0
input [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ 4 ] } ]
'''
GRAPH = onnx_bytes([("x", "FLOAT", [4])], [("y", "FLOAT", [4])])
LEAVES = "model.onnx leaves the model folder; not read"


def _other(root: Path) -> Path:
    """A second ONNX model whose graph the links below point at (inside the repository)."""
    make_model(root, "other", ONNX_CONFIG.replace('"m"', '"other"'), {1: {}})
    (root / "other" / "1" / "model.onnx").write_bytes(GRAPH)
    return root / "other" / "1"


def test_scan_marks_links_and_plain_entries(tmp_path: Path) -> None:
    target = _other(tmp_path)
    make_model(tmp_path, "m", ONNX_CONFIG, {1: {}})
    os.symlink(target / "model.onnx", tmp_path / "m" / "1" / "model.onnx")
    scanned = scan_repository(tmp_path)
    linked = scanned.model("m")
    plain = scanned.model("other")
    assert linked is not None and plain is not None
    assert linked.versions[0].entry("model.onnx").link  # type: ignore[union-attr]
    assert not plain.versions[0].entry("model.onnx").link  # type: ignore[union-attr]
    assert not any(f.link for f in plain.files)


def test_graph_linked_out_of_its_model_folder_is_refused(tmp_path: Path) -> None:
    target = _other(tmp_path)
    make_model(tmp_path, "m", ONNX_CONFIG, {1: {}})
    os.symlink(target / "model.onnx", tmp_path / "m" / "1" / "model.onnx")
    for _ in range(2):  # the second run has the graph read (by "other") in this process already
        report = validate(tmp_path)
        assert messages(report, "RB601") == [LEAVES]
        assert not [d for d in report.diagnostics if d.model == "other"]


def test_version_folder_linked_out_of_its_model_folder_is_refused(tmp_path: Path) -> None:
    target = _other(tmp_path)
    make_model(tmp_path, "m", ONNX_CONFIG, {})
    os.symlink(target, tmp_path / "m" / "1")
    assert scan_repository(tmp_path).model("m").files[0].link  # type: ignore[union-attr]
    for _ in range(2):
        assert messages(validate(tmp_path), "RB601") == [LEAVES]


def test_scan_through_descriptors_matches_the_path_based_scan_of_each_model(tmp_path: Path) -> None:
    # The one-process scan opens each model folder once and reads relative to it; anything unusual (a link,
    # a folder or FIFO named config.pbtxt, a link inside a version folder) must come out exactly as the
    # path-based scan_model gives it, messages included.
    from repo_builder.validate.scan import scan_model

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "config.pbtxt").write_text('name: "secret"\n')
    repo = tmp_path / "repo"
    for name in ("plain", "cfg_link_in", "cfg_link_out", "cfg_dir", "cfg_fifo", "ver_link", "file_link", "bad"):
        make_model(repo, name, ONNX_CONFIG.replace('"m"', f'"{name}"'))
    (repo / "file_link" / "1" / "model.onnx").write_bytes(GRAPH)
    (repo / "cfg_link_in" / "config.pbtxt").rename(repo / "cfg_link_in" / "real.pbtxt")
    (repo / "cfg_link_in" / "config.pbtxt").symlink_to("real.pbtxt")
    (repo / "cfg_link_out" / "config.pbtxt").unlink()
    (repo / "cfg_link_out" / "config.pbtxt").symlink_to(outside / "config.pbtxt")
    (repo / "cfg_dir" / "config.pbtxt").unlink()
    (repo / "cfg_dir" / "config.pbtxt").mkdir()
    (repo / "cfg_fifo" / "config.pbtxt").unlink()
    os.mkfifo(repo / "cfg_fifo" / "config.pbtxt")
    (repo / "ver_link" / "2").symlink_to("1")
    (repo / "file_link" / "1" / "alias.onnx").symlink_to("model.onnx")
    (repo / "bad" / "config.pbtxt").write_text("name: [\n")
    (repo / "folder_link").symlink_to("plain")
    (repo / "out_link").symlink_to(outside)
    scanned = scan_repository(repo)
    root = scanned.root
    assert len(scanned.models) == 10
    for model in scanned.models:
        expected = scan_model(model.path, root)
        assert (model.config, model.config_text, model.config_problem, model.config_line) == (
            expected.config, expected.config_text, expected.config_problem, expected.config_line
        ), model.name
        assert (model.files, model.versions, model.problem) == (expected.files, expected.versions, expected.problem), model.name
    by_name = {m.name: m for m in scanned.models}
    assert by_name["plain"].config is not None and by_name["cfg_link_in"].config is not None
    assert by_name["cfg_link_out"].config is None and "secret" not in (by_name["cfg_link_out"].config_problem or "")
    assert by_name["cfg_fifo"].config is None and by_name["cfg_dir"].config is None
