"""The one guarded reader (``repo_builder/guarded_read.py``, issue 28 item 1): what it opens, and that every
place in the package that opens or reads a file goes through it, except the places named below.

Adding code that reads a file? Read repository files with ``read_repository_file(path, root, KIND)`` (or
``open_repository_file`` for mmap/streaming) and parse their JSON with ``loads_json``. Only a file the user
names on the command line, a file a command itself wrote, or the package's own data may be read another
way: then add it to ``EXCEPTIONS`` with the reason.
"""

from __future__ import annotations

import ast
import os
import socket
import stat
from pathlib import Path

import pytest

from repo_builder import guarded_read
from repo_builder.guarded_read import (
    CONFIG,
    PLAN_HEADER,
    FileKind,
    UnsafeFile,
    loads_json,
    open_folder_at,
    open_repository_file,
    open_root,
    read_entry_at,
    read_repository_file,
)

PACKAGE = Path(guarded_read.__file__).resolve().parent
# Calls that open or read a file (builtins, os, pathlib, json/onnx/torch/numpy loaders, mmap, HF loaders).
READ_CALLS = frozenset({
    "open", "fdopen", "read_bytes", "read_text", "load", "load_model", "load_file", "mmap", "fromfile",
    "loadtxt", "safe_load", "from_pretrained", "parse_from_file",
})
USER_NAMED = "a file the user names on the command line"
WRITTEN = "a file repo-builder itself writes (or wrote) there"
OWN_DATA = "the package's own data"
NOT_A_FILE = "not a file read (a Triton model load, a URL, a socket)"

# "module::function::call" -> why it may bypass the guarded reader.
EXCEPTIONS: dict[str, str] = {
    "guarded_read.py::_open_beneath::os.open": "the guarded reader itself",
    "guarded_read.py::_open_at::os.open": "the guarded reader itself (relative to a folder's descriptor)",
    "environment.py::silence_stdout::os.open": "not a read: /dev/null opened to silence a dead stdout",
    "safe_paths.py::write_in_place::open": "a write, not a read: a report to /dev/stdout-like targets the user named",
    "triton/descendants.py::_carries::_PROC / str(pid) / 'environ'.read_bytes": "not a repository file: /proc of the server's own process tree",
    "triton/descendants.py::_stat::_PROC / str(pid) / 'stat'.read_text": "not a repository file: /proc of the server's own process tree",
    "report/records.py::load_record::path.read_text": USER_NAMED + " (report RESULT.json: regular file, size checked first)",
    "tune/runner.py::CandidateRunner.measure::self.server.load": "not a file read: the server loads a model by name",
    "validate/rule_config.py::read_config_file::path.read_text": USER_NAMED + " (--config, or the settings file found beside the working folder: regular file, at most 1 MiB)",
    "cli/bench.py::_input_files::file.path.read_bytes": USER_NAMED + " (--input [MODEL:]NAME=FILE)",
    "live/request.py::_read::file.path.read_bytes": USER_NAMED + " (validate --live --input [MODEL:]NAME=FILE)",
    "live/request.py::_from_files::np.load": USER_NAMED + " (a .npy given to --input)",
    "repository/build_target.py::_existing_config::path.read_text": WRITTEN + " (the ensemble config already in --out)",
    "compile/precision.py::read_onnx_facts::onnx.load": "compile: the ONNX given to compile or named by a checked recipe",
    "pipelines/plan_gate.py::regate::server.load": NOT_A_FILE,
    "precision/served.py::ServedPipeline.candidate::self.server.load": NOT_A_FILE,
    "precision/served.py::serve_pipeline::server.load": NOT_A_FILE,
    "precision/answers.py::load_reference::np.load": "not a file read: bytes the guarded reader returned, parsed without pickle",
    "precision/answers.py::save_reference::path.open": "a write, not a read: the gate's float answers into the build's stage",
    "precision/convert.py::_load::onnx.load": WRITTEN + " (the export in the build's stage) or " + USER_NAMED + " (compile's ONNX)",
    "precision/gate.py::_int8::onnx.load": WRITTEN + " (the gate's copy of the export, in the build's stage)",
    "precision/quantize.py::TensorBatches.__iter__::np.load": WRITTEN + " (the gate's calibration tensors, in the build's stage; no pickle)",
    "precision/quantize.py::name_nodes::onnx.load": WRITTEN + " (the export in the build's stage)",
    "precision/quantize.py::quantize_int8::onnx.load": WRITTEN + " (the gate's copy of the export, in the build's stage)",
    "precision/sensitivity.py::rank_nodes::onnx.load": WRITTEN + " (the gate's copy of the export, in the build's stage)",
    "precision/samples.py::_file_digest::path.open": USER_NAMED + " (--calibration-data / --accuracy-data images)",
    "precision/samples.py::_image_samples::f.read_bytes": USER_NAMED + " (--calibration-data / --accuracy-data images)",
    "precision/samples.py::_text_samples::path.read_text": USER_NAMED + " (--calibration-data / --accuracy-data texts, size checked first)",
    "compile/tensorrt_api.py::load_timing_cache::path.read_bytes": WRITTEN + " (the timing cache)",
    "compile/tensorrt_api.py::build_engine::plan_path.read_bytes": WRITTEN + " (the plan just built)",
    "compile/tensorrt_api.py::build_engine::parser.parse_from_file": "compile: TensorRT's parser on the ONNX given to compile",
    "export/exporter.py::_native_stdout_silenced::os.open": NOT_A_FILE + " (os.devnull)",
    "export/onnx_reader.py::_load::onnx.load": WRITTEN + " (the ONNX export just wrote) or " + USER_NAMED,
    "export/hf_checkpoint.py::load_config::config_file.read_text": USER_NAMED + " (--model DIR)",
    "export/tokenizer_onnx.py::read_wordpiece_tokenizer::tokenizer_json.read_text": WRITTEN + " (the export's saved tokenizer) or " + USER_NAMED,
    "pipelines/reference.py::served_copy::pre_config.read_text": WRITTEN + " (the repository build just wrote, checked against its manifest)",
    "export/text_classifier.py::head_labels::labels_file.read_text": USER_NAMED + " (--labels)",
    "export/hf_checkpoint.py::load_config::AutoConfig.from_pretrained": USER_NAMED + " (--model DIR, local_files_only)",
    "export/text_classifier.py::_load_model::AutoModelForSequenceClassification.from_pretrained": USER_NAMED + " (--model DIR)",
    "export/hf_checkpoint.py::load_tokenizer::AutoTokenizer.from_pretrained": USER_NAMED + " (--model DIR)",
    "export/torchvision_classifier.py::_load_user_model::torch.load": USER_NAMED + " (--model PATH.pt)",
    "export/torchvision_classifier.py::_unpickle_model::torch.load": USER_NAMED + " (--model PATH.pt, trusted by the user)",
    "export/torchvision_classifier.py::_state_dict_from_file::load_file": USER_NAMED + " (--weights)",
    "export/torchvision_classifier.py::_state_dict_from_file::torch.load": USER_NAMED + " (--weights)",
    "fsutil.py::sha256_file::Path(path).open": WRITTEN + " (hashes of built files)",
    "fsutil.py::write_bytes_atomic::tmp.open": WRITTEN,
    "pipelines/option_files.py::check_labels_file::path.read_text": USER_NAMED + " (--labels)",
    "export/embedder_checkpoint.py::_read_json::path.read_text": USER_NAMED + " (--model DIR: a sentence-transformers folder's own JSON settings)",
    "export/text_embedder.py::_load_encoder::AutoModel.from_pretrained": USER_NAMED + " (--model DIR)",
    "export/token_classifier.py::_load_model::AutoModelForTokenClassification.from_pretrained": USER_NAMED + " (--model DIR)",
    "export/ultralytics_detector.py::read_detector_onnx::onnx.load": USER_NAMED + " (--from-onnx)",
    "export/ultralytics_detector.py::symbolic_batch_copy::onnx.load": USER_NAMED + " (--from-onnx, a static export copied with a symbolic batch axis)",
    "export/ultralytics_detector.py::read_labels_file::path.read_text": USER_NAMED + " (--labels)",
    "export/tiny_embedder.py::make_tiny_sentence_transformer::out_dir / 'config.json'.read_text": WRITTEN + " (the tiny test model it just saved)",
    "export/tiny_token_classifier.py::make_tiny_token_classifier::transformers.AutoConfig.from_pretrained": WRITTEN + " (the tiny test model it just saved)",
    "export/tiny_token_classifier.py::make_tiny_token_classifier::transformers.BertModel.from_pretrained": WRITTEN + " (the tiny test model it just saved)",
    "pipelines/token_classification.py::_entity_step::tokenizer_json.read_bytes": WRITTEN + " (the export's tokenizer.json) or " + USER_NAMED + " (--from-export)",
    "pipelines/reference.py::bench_with_reference::reference.load": NOT_A_FILE,
    "pipelines/reference.py::check_reference::server.load": NOT_A_FILE,
    "pipelines/classification.py::read_labels::path.read_text": USER_NAMED + " (--labels)",
    "render/tuning.py::_cgroup_limit::path.read_text": "the machine's cgroup CPU quota (/sys/fs/cgroup)",
    "repository/lock.py::_holder::path.read_text": WRITTEN + " (the build lock)",
    "repository/lock.py::_open_locked::os.open": WRITTEN + " (the build lock)",
    "repository/moves.py::plan_model::model.folder / CONFIG_FILE.read_text": WRITTEN + " (the staged config)",
    "store/publish_record.py::read_publish_state::store.read_bytes": NOT_A_FILE + " (an object store key)",
    "repository/writer.py::_bridge_move::model.folder / CONFIG_FILE.read_text": WRITTEN + " (the staged config)",
    "repository/writer.py::_commit_first::path.read_text": WRITTEN + " (the staged config)",
    "triton/bench.py::bench_model::server.load": NOT_A_FILE,
    "triton/client.py::load_model::client.load_model": NOT_A_FILE,
    "triton/perf_analyzer.py::run_level::report.read_text": WRITTEN + " (perf_analyzer's CSV report in our own temporary folder)",
    "triton/process.py::spawn::open": WRITTEN + " (the server log)",
    "triton/process.py::answers::_direct_opener().open": NOT_A_FILE,
    "triton/server_log.py::log_text::open": WRITTEN + " (the server log)",
    "triton/serving.py::write_ready_file::os.fdopen": WRITTEN + " (--ready-file)",
    "triton/image_python.py::_cache_lock::os.open": "not a read: the lock file of repo-builder's own cache (~/.cache/repo-builder)",
    "triton/image_python.py::_rewrite_prefix::path.read_bytes": "a venv repo-builder itself just made in its own cache",
    "triton/standin.py::_install_standin::config_path.read_text": "--live's staged copy (hard links; live runs repository code anyway)",
    "triton/standin.py::_install_standin::STANDIN_SOURCE.read_text": OWN_DATA,
    "triton/standin_onnx_model.py::_settings::Path(__file__).parent / SETTINGS_FILE.read_text": "the stand-in's settings, written by --live",
    "triton/stub_hang.py::watch_load::load_model": NOT_A_FILE,
    "onnx_io.py::_read::mmap.mmap": "maps a descriptor open_repository_file opened",
    "validate/conformance.py::load_cases::suite / INDEX.read_text": OWN_DATA + " (the conformance suite)",
    "validate/conformance.py::_copy_model::config.read_text": OWN_DATA + " (the conformance suite)",
    "validate/conformance.py::materialize_case::case.folder / PARTIAL.read_text": OWN_DATA + " (the conformance suite)",
    "live/judge.py::_judge_one::judge.load": NOT_A_FILE,
    "store/local.py::lay_out::open": WRITTEN + " (the download folder)",
    "validate/reporters/json_report.py::report_schema::resources.files(__package__).joinpath(SCHEMA_FILE).read_text": OWN_DATA,
    "validate/scan.py::_ChildParse.start::os.fdopen": NOT_A_FILE + " (the pipe of the parsing child)",
    "validate/scan.py::_ChildParse.result::os.fdopen": NOT_A_FILE + " (the pipe of the parsing child)",
}


def _read_sites(path: Path) -> list[str]:
    """``function::call`` for each call in a module that opens or reads a file."""
    found: list[str] = []

    def visit(node: ast.AST, scope: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = scope
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                inner = f"{scope}.{child.name}" if scope else child.name
            if isinstance(child, ast.Call):
                func = child.func
                name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
                if name in READ_CALLS:
                    call = f"{ast.unparse(func.value)}.{name}" if isinstance(func, ast.Attribute) else name
                    found.append(f"{inner or '<module>'}::{call}")
            visit(child, inner)

    visit(ast.parse(path.read_text(encoding="utf-8")), "")
    return found


def all_read_sites() -> set[str]:
    return {
        f"{p.relative_to(PACKAGE).as_posix()}::{site}"
        for p in sorted(PACKAGE.rglob("*.py"))
        for site in _read_sites(p)
    }


def test_every_file_read_goes_through_the_reader_when_not_an_explicit_exception() -> None:
    bypassing = sorted(all_read_sites() - set(EXCEPTIONS))
    assert not bypassing, (
        "these read files without repo_builder.guarded_read (use read_repository_file / open_repository_file, "
        "or add them to EXCEPTIONS in tests/core/test_guarded_reads.py with the reason):\n  " + "\n  ".join(bypassing)
    )


def test_read_site_scan_finds_a_bypass_when_a_module_reads_a_file_directly(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("def f(p):\n    return open(p).read() + p.read_text()\nclass C:\n    def g(self, p):\n        return json.load(p)\n")
    assert _read_sites(module) == ["f::open", "f::p.read_text", "C.g::json.load"]


# --- the reader on its own ------------------------------------------------------------------------------


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "repo"
    (folder / "m").mkdir(parents=True)
    (folder / "m" / "config.pbtxt").write_text('name: "m"\n')
    return folder


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    secret = tmp_path / "secret.txt"
    secret.write_text("ghp_SECRET\n")
    return secret


def test_reader_returns_bytes_when_a_regular_file_lies_inside(root: Path) -> None:
    assert read_repository_file(root / "m" / "config.pbtxt", root, CONFIG) == b'name: "m"\n'


def test_reader_follows_links_when_they_stay_inside(root: Path) -> None:
    (root / "m" / "alias.pbtxt").symlink_to("config.pbtxt")
    (root / "n").symlink_to("m")
    assert read_repository_file(root / "m" / "alias.pbtxt", root, CONFIG) == b'name: "m"\n'
    assert read_repository_file(root / "n" / "config.pbtxt", root, CONFIG) == b'name: "m"\n'


@pytest.mark.parametrize("target", ["file", "folder"])
def test_reader_refuses_without_naming_the_target_when_a_link_leaves(root: Path, outside: Path, target: str) -> None:
    if target == "file":
        (root / "m" / "plan.json").symlink_to(outside)
        path = root / "m" / "plan.json"
    else:
        (root / "out").symlink_to(outside.parent)
        path = root / "out" / "secret.txt"
    with pytest.raises(UnsafeFile) as caught:
        read_repository_file(path, root, CONFIG)
    assert caught.value.reason == "outside" and "ghp_SECRET" not in str(caught.value)
    assert outside.parent.name not in str(caught.value)


@pytest.mark.parametrize("kind", ["loop", "dangling"])
def test_reader_refuses_when_a_link_loops_or_dangles(root: Path, kind: str) -> None:
    link = root / "m" / "plan.json"
    if kind == "loop":
        (root / "m" / "other").symlink_to("plan.json")
        link.symlink_to("other")
    else:
        link.symlink_to("missing.json")
    with pytest.raises(UnsafeFile) as caught:
        read_repository_file(link, root, CONFIG)
    assert caught.value.reason == "broken"


def test_reader_refuses_without_opening_when_the_file_is_a_fifo_or_socket(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    os.mkfifo(root / "m" / "fifo")
    monkeypatch.chdir(root / "m")  # bound by a relative name: a parallel worker's tmp path can pass AF_UNIX's 108 bytes
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind("sock")
        for name in ("fifo", "sock"):
            with pytest.raises(UnsafeFile) as caught:
                read_repository_file(root / "m" / name, root, CONFIG)
            assert caught.value.reason == "special"


@pytest.mark.skipif(os.geteuid() != 0, reason="mknod of a character device needs root")
def test_reader_refuses_without_opening_when_the_file_is_a_device(root: Path) -> None:
    os.mknod(root / "m" / "zero", stat.S_IFCHR | 0o600, os.makedev(1, 5))
    with pytest.raises(UnsafeFile) as caught:
        read_repository_file(root / "m" / "zero", root, CONFIG)
    assert caught.value.reason == "special"


def test_reader_refuses_before_reading_when_the_file_is_over_its_kind_limit(root: Path) -> None:
    (root / "m" / "big").write_bytes(b"x" * 101)
    with pytest.raises(UnsafeFile) as caught:
        read_repository_file(root / "m" / "big", root, FileKind("thing", 100))
    assert caught.value.reason == "too-big" and "100-byte limit" in str(caught.value)
    assert read_repository_file(root / "m" / "big", root, PLAN_HEADER) == b"x" * 28


@pytest.mark.parametrize("swapped", ["file", "folder"])
def test_reader_never_follows_a_link_swapped_in_after_the_check(
    root: Path, outside: Path, monkeypatch: pytest.MonkeyPatch, swapped: str
) -> None:
    # The check resolves the path; the open walks it with O_NOFOLLOW: a swap in between is refused.
    real_resolve = guarded_read._resolve
    path = root / "m" / "config.pbtxt"
    (outside.parent / "config.pbtxt").write_text("ghp_SECRET\n")

    def swap_after_check(*args: object) -> tuple[str, str]:
        result = real_resolve(*args)
        if swapped == "file":
            path.unlink()
            path.symlink_to(outside)
        else:
            (root / "m").rename(root / "m_old")
            (root / "m").symlink_to(outside.parent)
        return result

    monkeypatch.setattr(guarded_read, "_resolve", swap_after_check)
    with pytest.raises(UnsafeFile) as caught:
        read_repository_file(path, root, CONFIG)
    assert caught.value.reason == "outside" and "ghp_SECRET" not in str(caught.value)


def test_open_repository_file_gives_a_descriptor_when_the_file_is_inside(root: Path) -> None:
    with open_repository_file(root / "m" / "config.pbtxt", root, CONFIG) as (fd, size):
        assert size == 10 and os.pread(fd, 4, 0) == b"name"


@pytest.mark.parametrize("text", ["[" * 100_000 + "]" * 100_000, '{"a":' * 65 + "1" + "}" * 65])
def test_loads_json_refuses_when_nested_deeper_than_the_limit(text: str) -> None:
    with pytest.raises(ValueError, match="deeper than 64"):
        loads_json(text, "plan.json")


def test_loads_json_returns_data_when_nested_within_the_limit() -> None:
    assert loads_json('{"a": [[1]]}', "plan.json") == {"a": [[1]]}


def _listed(fd: int) -> dict[str, os.DirEntry[str]]:
    with os.scandir(fd) as it:
        return {e.name: e for e in it}


def test_read_entry_at_reads_a_regular_file_and_refuses_links_folders_fifos_and_big_files(
    root: Path, outside: Path
) -> None:
    (root / "m" / "out.pbtxt").symlink_to(outside)
    (root / "m" / "inside.pbtxt").symlink_to("config.pbtxt")  # a link that stays inside: the path reader's case
    (root / "m" / "sub").mkdir()
    os.mkfifo(root / "m" / "fifo")
    (root / "m" / "big").write_bytes(b"x" * 101)
    top = open_root(root)
    try:
        fd = open_folder_at(top, "m")
    finally:
        os.close(top)
    try:
        entries = _listed(fd)
        assert read_entry_at(fd, entries["config.pbtxt"], CONFIG) == b'name: "m"\n'
        for name, reason in (("out.pbtxt", "special"), ("inside.pbtxt", "special"), ("sub", "special"), ("fifo", "special")):
            with pytest.raises(UnsafeFile) as caught:
                read_entry_at(fd, entries[name], CONFIG)
            assert caught.value.reason == reason and "ghp_SECRET" not in str(caught.value)
        with pytest.raises(UnsafeFile) as caught:
            read_entry_at(fd, entries["big"], FileKind("thing", 100))
        assert caught.value.reason == "too-big"
    finally:
        os.close(fd)


def test_read_entry_at_never_follows_a_link_swapped_in_after_the_listing(root: Path, outside: Path) -> None:
    top = open_root(root)
    fd = open_folder_at(top, "m")
    os.close(top)
    try:
        entry = _listed(fd)["config.pbtxt"]  # listed as a regular file
        (root / "m" / "config.pbtxt").unlink()
        (root / "m" / "config.pbtxt").symlink_to(outside)
        with pytest.raises(UnsafeFile) as caught:
            read_entry_at(fd, entry, CONFIG)
        assert caught.value.reason == "unreadable" and "ghp_SECRET" not in str(caught.value)
    finally:
        os.close(fd)


def test_open_folder_at_refuses_a_folder_that_is_a_link(root: Path, outside: Path) -> None:
    (root / "out").symlink_to(outside.parent)
    top = open_root(root)
    try:
        with pytest.raises(OSError):
            os.close(open_folder_at(top, "out"))
    finally:
        os.close(top)
