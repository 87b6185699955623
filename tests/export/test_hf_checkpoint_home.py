"""The Hugging Face checkpoint helpers have one home (export/hf_checkpoint.py): no exporter reaches into
another module's private names to share them."""

from __future__ import annotations

import ast
from pathlib import Path

import repo_builder.export

EXPORT_DIR = Path(repo_builder.export.__file__).parent


def _private_imports(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("repo_builder."):
            found += [f"{path.name}: {node.module}.{a.name}" for a in node.names if a.name.startswith("_")]
    return found


def test_export_modules_import_no_private_name_when_sharing_helpers() -> None:
    found = [hit for path in sorted(EXPORT_DIR.glob("*.py")) for hit in _private_imports(path)]
    assert found == []


def test_private_imports_finds_a_private_name_when_one_is_imported(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("from repo_builder.export.hf_checkpoint import _x, load_config\n", encoding="utf-8")
    assert _private_imports(module) == ["m.py: repo_builder.export.hf_checkpoint._x"]


def test_text_exporters_share_the_checkpoint_loader_when_imported() -> None:
    from repo_builder.export import hf_checkpoint, text_classifier, text_embedder, token_classifier

    for module in (text_classifier, token_classifier, text_embedder):
        assert module.load_config is hf_checkpoint.load_config
        assert module.load_tokenizer is hf_checkpoint.load_tokenizer
        assert module.check_model_dir is hf_checkpoint.check_model_dir


def test_text_graph_falls_back_to_tokenizer_size_and_pad_0_when_config_and_tokenizer_say_nothing() -> None:
    from types import SimpleNamespace

    from repo_builder.export.text_graph import text_graph

    class Tokenizer:
        pad_token_id = None

        def __len__(self) -> int:
            return 77

    graph = text_graph(SimpleNamespace(type_vocab_size=0), Tokenizer(), ["input_ids"], "logits", {0: "batch"}, 32)
    assert (graph.vocab_size, graph.type_vocab_size, graph.pad_token_id) == (77, 1, 0)
    assert graph.dynamic_axes == {"input_ids": {0: "batch", 1: "sequence"}, "logits": {0: "batch"}}
