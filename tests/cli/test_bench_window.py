"""bench (issue 38): per-step figures over the measured window only, as the headline; a line for each file
it wrote; the inputs it sent recorded (text and its length, image size)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from google.protobuf import text_format
from support.bench_repository import write_repository
from tritonclient.grpc import model_config_pb2

from repo_builder.cli.main import main
from repo_builder.triton.bench import payloads_for
from repo_builder.triton.bench_inputs import describe_payload, format_inputs, image_size
from repo_builder.triton.synthesize import SAMPLE_TEXT, sample_image, tiny_png

MIXED_CONFIG = '''name: "mixed"
backend: "python"
max_batch_size: 2
input [ { name: "TEXT" data_type: TYPE_STRING dims: [ 1 ] },
        { name: "IMAGE" data_type: TYPE_UINT8 dims: [ -1 ] },
        { name: "PHOTO" data_type: TYPE_STRING dims: [ 1 ] },
        { name: "SCORES" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 1 ] } ]
'''
SLOW_PY = '''import time
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        time.sleep(0.02)  # every request costs 20 ms: warm-up and window hold about as many requests each
        return [pb_utils.InferenceResponse([pb_utils.Tensor("Y", pb_utils.get_input_tensor_by_name(r, "X").as_numpy() * 2)])
                for r in requests]
'''


def test_bench_records_synthesized_text_with_its_length_and_image_sizes() -> None:
    config = text_format.Parse(MIXED_CONFIG, model_config_pb2.ModelConfig())
    inputs = {e["name"]: e for e in describe_payload(payloads_for(config, {})[0], given=())}
    assert inputs["TEXT"] == {"name": "TEXT", "source": "synthesized", "datatype": "BYTES", "shape": [1, 1],
                              "text": SAMPLE_TEXT.decode(), "length": len(SAMPLE_TEXT.decode()), "bytes": len(SAMPLE_TEXT)}
    png = {"format": "PNG", "width": 8, "height": 8, "bytes": len(tiny_png())}
    assert inputs["IMAGE"]["image"] == png and inputs["PHOTO"]["image"] == png
    assert inputs["SCORES"] == {"name": "SCORES", "source": "synthesized", "datatype": "FP32", "shape": [1, 4]}
    line = format_inputs(list(inputs.values()))
    assert f"TEXT (synthesized): text {SAMPLE_TEXT.decode()!r} ({len(SAMPLE_TEXT)} characters)" in line
    assert "IMAGE (synthesized): PNG image 8x8" in line


def test_bench_records_a_given_file_as_a_file_and_reads_a_jpeg_size() -> None:
    pytest.importorskip("PIL")
    config = text_format.Parse(MIXED_CONFIG, model_config_pb2.ModelConfig())
    jpeg = sample_image(320, 240)
    entries = {e["name"]: e for e in describe_payload(payloads_for(config, {"PHOTO": [jpeg]})[0], given={"PHOTO"})}
    assert entries["PHOTO"]["source"] == "file" and entries["PHOTO"]["image"] == {"format": "JPEG", "width": 320, "height": 240, "bytes": len(jpeg)}
    assert image_size(b"not an image") is None and image_size(io.BytesIO(b"\xff\xd8\xff").read()) is None


@pytest.mark.slow
@pytest.mark.triton
def test_bench_counts_step_requests_in_the_measured_window_only_and_says_what_it_wrote(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = write_repository(tmp_path / "repo")
    (repo / "double" / "1" / "model.py").write_text(SLOW_PY)
    out, results = tmp_path / "bench.json", tmp_path / "bench.txt"
    code = main(["bench", str(repo), "--concurrency", "1", "--seconds", "1.5", "--warmup", "1.5", "--load-generator", "python",
                 "--json", str(out), "--output", str(results)])
    assert code == 0
    model = json.loads(out.read_text())["models"][0]
    level = model["levels"][0]
    step = next(s for s in level["steps"] if s["model"] == "double")
    # About as many requests ran in the warm-up as in the window: counting them would double the step's requests.
    assert level["requests"] > 20 and abs(step["requests"] - level["requests"]) <= 2, (step, level["requests"])
    assert model["inputs"] == [{"name": "X", "source": "synthesized", "datatype": "FP32", "shape": [1, 3]}]
    err = capsys.readouterr().err
    assert f"wrote {results} (the results as text)" in err and f"wrote {out} (the results as JSON)" in err
    assert "inputs: X (synthesized): FP32 [1, 3]" in results.read_text()
