"""--max-request-bytes and --step-memory-mib: checked, rendered into every client-facing step and its README (issue 40).

The served behaviour (refusals, busy answers, batch neighbours answered) is tested on the embedded Triton in
test_request_budget.py; this module checks what is written, without a server.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from repo_builder.errors import UserError
from repo_builder.pipelines.request_options import REQUEST_DEFAULTS
from repo_builder.pipelines.settings import PipelineSettings, budget_context
from repo_builder.render import context as ctx
from repo_builder.render.environment import make_environment
from repo_builder.render.render import render_source, render_text
from repo_builder.spec import TensorSpec


def constant(source: str, name: str) -> int:
    found = re.search(rf"^{name} = (\d+)", source, re.M)
    assert found is not None, name
    return int(found.group(1))


def test_defaults_are_64_mib_per_request_and_2048_mib_per_instance_when_the_flags_are_not_given() -> None:
    assert REQUEST_DEFAULTS["max_request_bytes"] == ctx.DEFAULT_MAX_REQUEST_BYTES == 64 * 2**20
    assert REQUEST_DEFAULTS["step_memory_mib"] == ctx.DEFAULT_STEP_MEMORY_MIB == 2048
    settings = PipelineSettings(name="m", runtime="python")
    assert budget_context(settings)["step_memory_budget"] == 2048 * 2**20


def test_partials_fall_back_to_the_context_defaults_when_a_caller_renders_them_without_budget_keys() -> None:
    env = make_environment()
    budget = render_source(env, "model/_request_budget.py.j2", {})
    assert constant(budget, "MAX_REQUEST_BYTES") == ctx.DEFAULT_MAX_REQUEST_BYTES
    assert constant(budget, "STEP_MEMORY_BUDGET") == ctx.DEFAULT_STEP_MEMORY_MIB * 2**20
    header = render_source(env, "model/_image_header.py.j2", {})
    assert constant(header, "PIXEL_BYTES") == ctx.DECODE_BYTES_PER_PIXEL["opencv"]
    assert constant(render_source(env, "model/_text_bounds.py.j2", {"bytes_per_token": 64}), "TOKENIZE_BYTES") == ctx.TOKENIZE_BYTES_PER_BYTE
    spec = TensorSpec("input", "float32", ("batch", 3, 224, 224))
    preprocess = {"resize": 256, "crop": 224, "mean": [0.5] * 3, "std": [0.5] * 3}
    image = render_source(env, "model/image_preprocess.py.j2", ctx.image_preprocess_context("p", "m", spec, preprocess, draft_margin=2, origin="s"))
    assert constant(image, "PIXEL_BYTES") == ctx.DECODE_BYTES_PER_PIXEL["pillow"]


@pytest.mark.parametrize(("flag", "field"), [("--max-request-bytes", "max_request_bytes"), ("--step-memory-mib", "step_memory_mib")])
@pytest.mark.parametrize("value", [0, -1, True])
def test_settings_refuse_the_limit_naming_its_flag_when_it_is_not_a_positive_integer(flag: str, field: str, value: int) -> None:
    with pytest.raises(UserError, match=re.escape(f"{flag} must be >= 1")):
        PipelineSettings(name="m", runtime="python", **{field: value})


def test_text_step_and_readme_state_the_given_limits_when_built_with_them() -> None:
    env = make_environment()
    settings = PipelineSettings(name="m", runtime="python", max_request_bytes=1000, step_memory_mib=3, step_instance_count=2)
    budget = budget_context(settings)
    pre = ctx.text_preprocess_context("p", "m", [TensorSpec("input_ids", "int64", ("batch", "seq"))], {"max_length": 128}, "s")
    source = render_source(env, "model/text_preprocess.py.j2", {**pre, **budget})
    assert constant(source, "MAX_REQUEST_BYTES") == 1000 and constant(source, "STEP_MEMORY_BUDGET") == 3 * 2**20
    assert "serve_within_budget(requests, self.request_cost, self.answer" in source
    readme = " ".join(render_text(env, "model/preprocess_README.md.j2", ctx.limits_readme_context("p", max_length=128, budget=budget)).split())
    assert "more than 1000 bytes" in readme and "--max-request-bytes N" in readme
    assert "within 3 MiB (`STEP_MEMORY_BUDGET`)" in readme and "2 instance(s), so at most 6 MiB" in readme
    assert "--step-memory-mib N" in readme and "UNAVAILABLE" in readme
    # 128 tokens: a text's tokenized part is at most 128 x 256 bytes, each costing 4 + 256 bytes.
    assert "at most 32768 bytes" in readme and "One text: up to 8.1 MiB" in readme


def test_image_readme_states_the_unbudgeted_batch_worst_case_when_rendered_for_each_decoder() -> None:
    env = make_environment()
    budget = budget_context(PipelineSettings(name="m", runtime="python"), instances=2)
    for decoder, per_image in (("pillow", 939), ("opencv", 768)):
        limits = ctx.limits_readme_context("p", max_image_pixels=ctx.DEFAULT_MAX_IMAGE_PIXELS, decoder=decoder, budget=budget)
        readme = " ".join(render_text(env, "model/preprocess_README.md.j2", limits).split())
        assert f"up to {per_image} MiB" in readme, decoder
        assert f"`max_batch_size` 8 such images would take {round(8 * ctx.DEFAULT_MAX_IMAGE_PIXELS * ctx.DECODE_BYTES_PER_PIXEL[decoder] / 2**20)} MiB" in readme
        assert "so at most 4096 MiB of request work at once" in readme


def test_text_recognizer_step_and_readme_state_the_given_limits_when_built_with_them(tmp_path: Path) -> None:
    pytest.importorskip("rapidocr_onnxruntime", reason="needs-rapidocr: --from-rapidocr takes its wheel's models (test extra)")
    from repo_builder.cli.main import main

    out = tmp_path / "repo"
    assert main(["build", "text-recognizer", "--from-rapidocr", "--out", str(out), "--name", "ocr", "--runtime", "onnxruntime",
                 "--no-gpu", "--max-request-bytes", "1000", "--step-memory-mib", "3", "--max-image-pixels", "5000", "-q"]) == 0
    source = (out / "ocr_preprocess" / "1" / "model.py").read_text(encoding="utf-8")
    assert constant(source, "MAX_REQUEST_BYTES") == 1000 and constant(source, "STEP_MEMORY_BUDGET") == 3 * 2**20
    assert constant(source, "MAX_IMAGE_PIXELS") == 5000 and "admission=admit_in_turn" in source
    readme = " ".join((out / "ocr" / "1" / "README.md").read_text(encoding="utf-8").split())
    assert "more than 1000 bytes" in readme and "within 3 MiB (`STEP_MEMORY_BUDGET`)" in readme
    assert "more than 5000 pixels" in readme
