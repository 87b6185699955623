"""Exports shared by the export tests: each is made once per session (ResNet50 alone takes seconds)."""

from __future__ import annotations

from pathlib import Path

import pytest

from repo_builder.export.resnet50 import export_resnet50
from repo_builder.export.text_classifier import export_text_classifier
from repo_builder.export.tiny_models import make_tiny_text_classifier
from repo_builder.spec import OnnxArtifact


@pytest.fixture(scope="session")
def resnet_random(tmp_path_factory: pytest.TempPathFactory) -> OnnxArtifact:
    return export_resnet50(tmp_path_factory.mktemp("resnet") / "out", weights="random")


@pytest.fixture(scope="session")
def tiny_bert_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_text_classifier(tmp_path_factory.mktemp("tiny") / "bert", num_labels=3, seed=0)


@pytest.fixture(scope="session")
def tiny_bert_no_types_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_text_classifier(
        tmp_path_factory.mktemp("tiny") / "bert-no-types", num_labels=4, seed=1, with_token_type_ids=False
    )


@pytest.fixture(scope="session")
def tiny_bert_export(tmp_path_factory: pytest.TempPathFactory, tiny_bert_dir: Path) -> OnnxArtifact:
    return export_text_classifier(tiny_bert_dir, tmp_path_factory.mktemp("tiny-export") / "out")


@pytest.fixture(scope="session")
def tiny_bert_no_types_export(
    tmp_path_factory: pytest.TempPathFactory, tiny_bert_no_types_dir: Path
) -> OnnxArtifact:
    return export_text_classifier(tiny_bert_no_types_dir, tmp_path_factory.mktemp("tiny-export") / "out")
