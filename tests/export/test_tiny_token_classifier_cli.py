"""`python -m repo_builder.export.tiny_token_classifier DIR` writes the tiny NER model (issue 38: it exited 0
and wrote nothing), as `python -m repo_builder.export.tiny_models DIR` writes the tiny classifier."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from repo_builder.export.tiny_token_classifier import TINY_NER_LABELS, main

pytest.importorskip("transformers")


def test_tiny_token_classifier_module_writes_the_model_when_run_with_a_folder(tmp_path: Path) -> None:
    out = tmp_path / "tiny-ner"
    done = subprocess.run([sys.executable, "-m", "repo_builder.export.tiny_token_classifier", str(out)],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(out)
    config = json.loads((out / "config.json").read_text())
    assert config["architectures"] == ["BertForTokenClassification"]
    assert [config["id2label"][str(i)] for i in range(len(TINY_NER_LABELS))] == list(TINY_NER_LABELS)
    assert (out / "model.safetensors").is_file() and (out / "tokenizer.json").is_file()


def test_tiny_token_classifier_takes_labels_and_refuses_a_folder_in_use(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "ner"
    assert main([str(out), "--labels", "O,B-X,I-X", "--seed", "1"]) == 0
    assert json.loads((out / "config.json").read_text())["id2label"] == {"0": "O", "1": "B-X", "2": "I-X"}
    with pytest.raises(SystemExit) as refused:
        main([str(out)])
    assert refused.value.code == 2 and "not an empty folder" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([str(tmp_path / "other"), "--labels", "O,O"])
