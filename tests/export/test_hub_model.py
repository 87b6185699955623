"""``--model`` as a Hugging Face Hub id (issue 26): read from a local cache laid out here in a temporary
HF_HOME (no network on this machine); a folder on disk always wins; offline and not cached is one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from repo_builder.cli.main import main
from repo_builder.errors import UserError
from repo_builder.export.hub_model import hub_cache, looks_like_hub_id, resolve_model

pytest.importorskip("huggingface_hub", reason="the export extra brings huggingface_hub")
COMMIT = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("transformers", reason="the export extra builds the tiny text classifier")
    from repo_builder.export.tiny_models import make_tiny_text_classifier

    return make_tiny_text_classifier(tmp_path_factory.mktemp("tiny-bert"), num_labels=2, seed=1)


def lay_out_cache(home: Path, repo_id: str, model: Path) -> Path:
    """The Hub cache's layout as huggingface_hub writes it: refs/main names a snapshot folder of files."""
    folder = home / "hub" / f"models--{repo_id.replace('/', '--')}"
    snapshot = folder / "snapshots" / COMMIT
    snapshot.mkdir(parents=True)
    for file in model.iterdir():
        (snapshot / file.name).write_bytes(file.read_bytes())
    (folder / "refs").mkdir()
    (folder / "refs" / "main").write_text(COMMIT)
    return snapshot


@pytest.fixture
def hf_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "hf-home"
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return home


@pytest.mark.parametrize(("value", "hub"), [("acme/tiny-bert", True), ("bert-base-uncased", True), ("./x", False),
                                            ("/abs/path", False), ("a/b/c", False), ("model.pt", False), ("../up", False)])
def test_looks_like_hub_id_accepts_only_hub_ids_when_given(value: str, hub: bool) -> None:
    assert looks_like_hub_id(value) is hub


def test_hub_cache_follows_hf_home_when_set(hf_home: Path) -> None:
    assert hub_cache() == hf_home / "hub"


def test_resolve_model_finds_the_cached_snapshot_when_the_id_is_cached(hf_home: Path, tiny: Path) -> None:
    snapshot = lay_out_cache(hf_home, "acme/tiny-bert", tiny)
    assert resolve_model("acme/tiny-bert") == snapshot


def test_resolve_model_prefers_a_folder_on_disk_when_one_has_the_ids_name(
    hf_home: Path, tiny: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lay_out_cache(hf_home, "acme/tiny-bert", tiny)
    (tmp_path / "acme" / "tiny-bert").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    assert resolve_model("acme/tiny-bert") == Path("acme/tiny-bert")


def test_resolve_model_says_offline_and_not_cached_in_one_line_when_missing(hf_home: Path) -> None:
    with pytest.raises(UserError) as info:
        resolve_model("acme/not-here")
    message = str(info.value)
    assert "\n" not in message and "not in the Hugging Face cache" in message and "HF_HUB_OFFLINE" in message


def test_build_text_classifier_takes_a_cached_hub_id_when_offline(
    hf_home: Path, tiny: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lay_out_cache(hf_home, "acme/tiny-bert", tiny)
    out = tmp_path / "repo"
    code = main(["build", "text-classifier", "--model", "acme/tiny-bert", "--runtime", "python", "--out", str(out),
                 "--skip-parity", "-q"])
    assert code == 0, capsys.readouterr().err
    assert (out / "text_classifier_model" / "1" / "model.onnx").is_file()
    assert main(["build", "text-classifier", "--model", "acme/missing", "--out", str(tmp_path / "r2"), "-q"]) == 2
    assert "not in the Hugging Face cache" in capsys.readouterr().err
