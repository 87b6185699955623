"""The README as a new user reads it (issue 26): every file it points at exists in a clone of the project
alone, and its offline text example runs with no network."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
# Inline code that names a file or folder of the project (not an example path, a URL or a generated file).
_PROJECT_PATH = re.compile(r"^(\.\./|\./|docs/|scripts/|templates/|tests/|repo_builder/|\.ci/|\.pre-commit|[A-Z]+\.md$)")
CLOSED_PORT = "http://127.0.0.1:9"  # nothing listens: any network use fails at once


def prose(text: str) -> str:
    """The README without its fenced code blocks (their paths are examples the user creates)."""
    return re.sub(r"```.*?```", "", text, flags=re.S)


def referenced_paths(text: str) -> set[str]:
    links = {t for t in re.findall(r"\]\(([^)#]+)\)", text) if "://" not in t}
    inline = {c.split()[0] for c in re.findall(r"`([^`\n]+)`", prose(text)) if c.strip()}
    return links | {c for c in inline if _PROJECT_PATH.match(c)}


def test_referenced_paths_finds_links_and_project_paths_when_given_markdown() -> None:
    text = "see [a](docs/a.md), `scripts/x --flag`, `../shared/y.md`, `out/r.sarif`, `signature.json`\n```\nscripts/z\n```"
    assert referenced_paths(text) == {"docs/a.md", "scripts/x", "../shared/y.md"}


def test_readme_points_only_at_files_in_the_clone_when_read() -> None:
    missing = sorted(p for p in referenced_paths(README) if not (ROOT / p).exists() or p.startswith("../"))
    assert missing == [], f"README.md points at files a clone does not have: {missing}"


def offline_text_example() -> list[str]:
    section = README.split("### A text model, offline", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, flags=re.S)
    assert block is not None, "the offline text example has no bash block"
    return [line for line in block.group(1).splitlines() if line.strip() and not line.startswith("#")]


def _argv(line: str) -> list[str]:
    words = shlex.split(line)
    if words[0] == ".venv/bin/python":
        return [sys.executable, *words[1:]]
    if words[0] in (".venv/bin/repo-builder", "repo-builder"):
        return [sys.executable, "-m", "repo_builder", *words[1:]]
    raise AssertionError(f"unexpected command in the README's offline example: {line}")


@pytest.mark.triton
def test_readme_offline_text_example_runs_when_there_is_no_network(tmp_path: Path) -> None:
    pytest.importorskip("pytriton", reason="the example's --live needs the serve extra")
    pytest.importorskip("transformers", reason="the example needs the export extra")
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "HF_HOME": str(tmp_path / "empty-hf-home"),  # nothing cached: nothing may come from the Hub
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        **{k: CLOSED_PORT for k in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")},
        "no_proxy": "127.0.0.1,localhost",  # the embedded Triton on loopback
    }
    lines = offline_text_example()
    assert any("tiny_models" in line for line in lines) and any("--live" in line for line in lines)
    for line in lines:
        done = subprocess.run(_argv(line), cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"{line}\n{done.stdout}\n{done.stderr}"
    assert "passes" in done.stdout and (tmp_path / "repo-text" / "text_classifier" / "config.pbtxt").is_file()
