"""The ONNX Runtime stand-in runs each execution's requests as one batch, as the ONNX Runtime backend does,
and gives each request its own rows back."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest
from support.onnx_repo_factory import write_onnx_model, write_scale_onnx
from support.triton_stats import served_counts

from repo_builder.triton.client import connect, infer_model
from repo_builder.triton.standin import StandIn, remove_stage, stage_repository
from repo_builder.triton.standin_onnx_model import run_batched


def _session(path: Path):  # type: ignore[no-untyped-def]
    import onnxruntime

    return onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def test_run_batched_returns_each_feed_its_own_rows_when_joined(tmp_path: Path) -> None:
    session = _session(write_scale_onnx(tmp_path / "scale.onnx"))
    feeds = [{"X": np.full((rows, 4), float(i), dtype=np.float32)} for i, rows in enumerate((1, 3, 2))]
    joined = run_batched(session, ["Y"], feeds)
    assert joined is not None and len(joined) == 3
    for feed, (y,) in zip(feeds, joined, strict=True):
        np.testing.assert_array_equal(y, session.run(["Y"], feed)[0])


def test_run_batched_declines_when_feeds_disagree_past_the_batch_axis(tmp_path: Path) -> None:
    session = _session(write_scale_onnx(tmp_path / "scale.onnx"))
    assert run_batched(session, ["Y"], [{"X": np.ones((1, 4), np.float32)}, {"X": np.ones((1, 5), np.float32)}]) is None
    assert run_batched(session, ["Y"], [{"X": np.ones((1, 4), np.float32)}, {}]) is None


def test_run_batched_declines_when_an_output_is_not_batch_major(tmp_path: Path) -> None:
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("ReduceSum", ["X"], ["Y"], keepdims=0)], "total",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(tmp_path / "total.onnx"))
    session = _session(tmp_path / "total.onnx")
    assert run_batched(session, ["Y"], [{"X": np.ones((1, 4), np.float32)}, {"X": np.ones((2, 4), np.float32)}]) is None


def write_seen_rows_onnx(path: Path) -> Path:
    """``Y = X * 3`` and ``SEEN``: per row, how many rows the session run held (one run or one per request)."""
    import onnx
    from onnx import TensorProto, helper

    nodes = [
        helper.make_node("Mul", ["X", "three"], ["Y"]),
        helper.make_node("Shape", ["X"], ["shape"]),
        helper.make_node("Slice", ["shape", "zero", "one"], ["rows"]),
        helper.make_node("Cast", ["rows"], ["rows_f"], to=TensorProto.FLOAT),
        helper.make_node("Reshape", ["rows_f", "one_by_one"], ["cell"]),
        helper.make_node("Concat", ["rows", "one"], ["out_shape"], axis=0),
        helper.make_node("Expand", ["cell", "out_shape"], ["SEEN"]),
    ]
    graph = helper.make_graph(
        nodes, "seen_rows",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["batch", 4]),
         helper.make_tensor_value_info("SEEN", TensorProto.FLOAT, ["batch", 1])],
        [helper.make_tensor("three", TensorProto.FLOAT, [], [3.0]),
         helper.make_tensor("zero", TensorProto.INT64, [1], [0]),
         helper.make_tensor("one", TensorProto.INT64, [1], [1]),
         helper.make_tensor("one_by_one", TensorProto.INT64, [2], [1, 1])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))
    return path


@pytest.mark.triton
def test_standin_batches_concurrent_requests_and_answers_each_with_its_rows(tmp_path: Path) -> None:
    from repo_builder.triton import start_server

    repo = tmp_path / "repo"
    config = ('name: "scale"\nplatform: "onnxruntime_onnx"\nmax_batch_size: 8\n'
              'input [ { name: "X" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
              'output [ { name: "Y" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "SEEN" data_type: TYPE_FP32 dims: [ 1 ] } ]\n'
              'dynamic_batching { max_queue_delay_microseconds: 400000 }\n')
    write_onnx_model(repo, "scale", config)
    write_seen_rows_onnx(repo / "scale" / "1" / "model.onnx")
    staged = stage_repository(repo, [StandIn("scale")])
    sent = [np.arange(4 * rows, dtype=np.float32).reshape(rows, 4) + 100 * i for i, rows in enumerate((1, 2, 1, 3, 1, 1))]
    answers: dict[int, dict[str, np.ndarray]] = {}
    try:
        with start_server(staged.path, mode="explicit", startup_timeout=120.0) as server:
            server.load("scale", timeout=120)

            def send(index: int) -> None:
                answers[index] = infer_model(connect(server.grpc_url), "scale", {"X": sent[index]})

            threads = [threading.Thread(target=send, args=(i,)) for i in range(len(sent))]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(timeout=60)
            served_counts(server.grpc_url, "scale", at_least=len(sent))  # statistics settle after the answers
            stats = server.client.get_inference_statistics(model_name="scale", as_json=True)["model_stats"][0]
    finally:
        remove_stage(staged)
    for index, x in enumerate(sent):
        np.testing.assert_array_equal(answers[index]["Y"], x * 3)
    # 9 rows in 6 requests within one queue delay: the batcher gathered them, and one session run saw more
    # rows than any single request sent.
    assert int(stats["inference_count"]) == 9 and int(stats["execution_count"]) < len(sent)
    assert max(float(a["SEEN"].max()) for a in answers.values()) > max(len(x) for x in sent)
