"""The pure pieces of --live and serve: the stand-in's ONNX Runtime checks, failure classes, routes,
s3 URLs, arguments, ports, error roots. No server is started here."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.onnx_repo_factory import write_onnx_model, write_scale_onnx
from support.triton_repo_factory import Ensemble, Step, Tensor, write_ensemble, write_python_model

from repo_builder.errors import RefusedError, ToolError, UserError
from repo_builder.live.outcome import Failure, classify_crash, classify_failure, model_output
from repo_builder.live.plan import Route, plan_routes
from repo_builder.store.for_triton import remote_repository, triton_s3_url
from repo_builder.triton.arguments import Endpoints, ServerOptions, server_arguments
from repo_builder.triton.errors import ModelLoadError, ServerError
from repo_builder.triton.ports import check_distinct_ports, check_host
from repo_builder.triton.standin import StandIn, remove_stage, stage_repository
from repo_builder.triton.standin_onnx_model import StandInRefusal, check_config, completed_config
from repo_builder.triton.stub_hang import failed_stubs, unsettled_models
from repo_builder.validate.report import LiveResult, LiveStatus
from repo_builder.validate.scan import scan_repository

GRAPH_IN = {"X": ("TYPE_FP32", [-1, 4])}
GRAPH_OUT = {"Y": ("TYPE_FP32", [-1, 4])}


def _config(**io: object) -> dict[str, object]:
    config: dict[str, object] = {
        "name": "scale",
        "max_batch_size": 8,
        "input": [{"name": "X", "data_type": "TYPE_FP32", "dims": ["4"]}],
        "output": [{"name": "Y", "data_type": "TYPE_FP32", "dims": [4]}],
    }
    config.update(io)
    return config


def test_standin_check_passes_when_config_matches_graph() -> None:
    check_config(_config(), GRAPH_IN, GRAPH_OUT)  # dims may arrive as strings in the JSON


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"input": [{"name": "Z", "data_type": "TYPE_FP32", "dims": [4]}]}, "unexpected inference input 'Z', allowed inputs are: X"),
        (
            {"input": [{"name": "X", "data_type": "TYPE_INT32", "dims": [4]}]},
            "configuration expects datatype TYPE_INT32 for input 'X', model provides TYPE_FP32",
        ),
        ({"input": [{"name": "X", "data_type": "TYPE_FP32", "dims": [5]}]}, "making complete shape [-1,5]"),
        ({"max_batch_size": 0}, "the model expects 2 dimensions (shape [-1,4]) but the model configuration specifies 1"),
        ({"output": [{"name": "Y", "data_type": "TYPE_FP32", "dims": [-1]}]}, "tensor 'Y'"),
        ({"input": []}, "configuration expects 0 inputs, model provides 1"),
    ],
)
def test_standin_check_refuses_with_backend_message_when_config_differs(change: dict[str, object], message: str) -> None:
    with pytest.raises(StandInRefusal) as info:
        check_config(_config(**change), GRAPH_IN, GRAPH_OUT)
    assert message in str(info.value)
    assert classify_failure(str(info.value)) == (Failure.REFUSED, str(info.value).split("] ", 1)[1])


def test_standin_autocomplete_fills_batch_and_io_when_config_declares_none() -> None:
    done = completed_config({"name": "scale", "max_batch_size": 0}, GRAPH_IN, GRAPH_OUT)
    assert done["max_batch_size"] == 4
    assert done["input"] == [{"name": "X", "data_type": "TYPE_FP32", "dims": [4]}]
    check_config(done, GRAPH_IN, GRAPH_OUT)


def test_classify_failure_says_model_code_with_traceback_tail_when_initialize_raised() -> None:
    reason = (
        "Internal: ModuleNotFoundError: No module named 'nope' At: /tmp/s/repository/m/1/model.py(3): <module> "
        "<frozen importlib._bootstrap>(241): _call_with_frames_removed"
    )
    kind, message = classify_failure(reason)
    assert kind == Failure.MODEL_CODE
    assert message == "ModuleNotFoundError: No module named 'nope' (at 1/model.py(3): <module>)"


# What tritonserver 2.51 logged when a model's initialize() called os._exit() after printing a line.
STUB_DIED_LOG = """I1122 19:22:04.635992 19486 model_lifecycle.cc:472] "loading: m:1"
I1122 19:22:05.911657 19486 python_be.cc:2249] "TRITONBACKEND_ModelInstanceInitialize: m_0 (CPU device 0)"
no licence server, giving up
E1122 19:22:06.951930 19486 backend_model.cc:692] "ERROR: Failed to create instance: Stub process 'm_0' is not healthy."
"""


def test_classify_failure_says_model_code_with_its_output_when_stub_process_died() -> None:
    reason = "version 1 is at UNAVAILABLE state: Internal: Stub process 'm_0' is not healthy.;"
    kind, message = classify_failure(reason, STUB_DIED_LOG)
    assert kind == Failure.MODEL_CODE
    assert "exited or was killed" in message and message.endswith(
        "Stub process 'm_0' is not healthy.; its output ends: no licence server, giving up"
    )


def test_classify_failure_says_model_code_when_stub_died_during_warmup() -> None:
    reason = "version 1 is at UNAVAILABLE state: Invalid argument: failed to run warmup sample 'w': Stub process 'w_0' is not healthy.; ;"
    kind, message = classify_failure(reason)
    assert kind == Failure.MODEL_CODE and "failed to run warmup sample 'w'" in message


def test_model_output_keeps_only_lines_the_server_did_not_write_when_log_mixed() -> None:
    assert model_output(STUB_DIED_LOG) == "no licence server, giving up"
    assert model_output("+------+\n| a | b |\n") == ""


def test_classify_crash_says_model_code_when_server_died_running_the_model() -> None:
    backtrace = "Signal (6) received.\n 0# 0x000055C38D90F52D in /x/tritonserver\n 1# __libc_start_main in /lib/libc.so.6\n"
    kind, message = classify_crash("was killed by signal 6", STUB_DIED_LOG + backtrace)
    assert kind == Failure.MODEL_CODE and message.endswith("Signal (6) received.")  # not the frames after it
    assert message.startswith("tritonserver died while loading it (was killed by signal 6); the server was restarted")
    assert "the log ends: " in message and "Stub process 'm_0' is not healthy" in message


def test_classify_crash_says_refused_when_server_died_before_running_the_model() -> None:
    log = 'I1122 19:22:04.635992 19486 model_lifecycle.cc:472] "loading: m:1"\nterminate called after throwing std::length_error\n'
    kind, message = classify_crash("was killed by signal 6", log)
    assert kind == Failure.REFUSED and "std::length_error" in message


def test_live_result_verdict_text_says_how_it_was_proven_when_loaded() -> None:
    assert LiveResult(True, inferred=True, status=LiveStatus.LOADED, proven_by="stand-in").verdict_text == (
        "loaded through the ONNX Runtime stand-in, answered a request"
    )
    assert LiveResult(False, "boom", status=LiveStatus.MODEL_CODE_FAILED).verdict_text == "model code failed"
    assert LiveResult(False, "no").verdict_text == "refused"


def test_classify_failure_says_refused_when_python_model_lacks_its_class() -> None:
    kind, _ = classify_failure("AttributeError: module 'model' has no attribute 'TritonPythonModel' At: x/1/model.py(1): f")
    assert kind == Failure.REFUSED


def test_plan_routes_marks_tensorrt_and_its_ensemble_unproven_when_server_is_embedded(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    write_onnx_model(repo, "scale")
    plan = repo / "engine"
    (plan / "1").mkdir(parents=True)
    (plan / "config.pbtxt").write_text('platform: "tensorrt_plan"\nmax_batch_size: 8\n')
    (plan / "1" / "model.plan").write_bytes(b"not an engine")
    write_python_model(repo, "front")
    write_ensemble(repo, Ensemble("uses_engine", (Tensor("A"),), (Tensor("B"),), (Step("engine", (("X", "A"),), (("Y", "B"),)),)))
    routes = plan_routes(scan_repository(repo), embedded=True)
    assert routes["scale"].route == Route.STAND_IN
    assert routes["front"].route == Route.LOAD
    assert routes["engine"].route == Route.UNPROVEN and "no 'tensorrt' backend" in (routes["engine"].reason or "")
    assert routes["uses_engine"].route == Route.UNPROVEN and "'engine'" in (routes["uses_engine"].reason or "")
    full = plan_routes(scan_repository(repo), embedded=False)
    assert {r.route for r in full.values()} == {Route.LOAD}


def test_stage_repository_leaves_original_untouched_when_standin_installed(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    write_onnx_model(repo, "scale")
    (repo / "scale" / "config.pbtxt").write_text(
        (repo / "scale" / "config.pbtxt").read_text() + 'default_model_filename: "model.onnx"\n'
    )
    before = {p: p.read_bytes() for p in repo.rglob("*") if p.is_file()}
    staged = stage_repository(repo, [StandIn("scale")])
    try:
        config = (staged.path / "scale" / "config.pbtxt").read_text()
        assert 'backend: "python"' in config and "default_model_filename" not in config
        assert (staged.path / "scale" / "1" / "model.py").is_file()
        assert staged.stand_ins == ("scale",)
    finally:
        remove_stage(staged)
    assert {p: p.read_bytes() for p in repo.rglob("*") if p.is_file()} == before
    assert not staged.path.parent.exists()


def test_triton_s3_url_uses_host_port_form_when_endpoint_given() -> None:
    assert triton_s3_url("s3://bucket/models", "http://127.0.0.1:9000") == "s3://127.0.0.1:9000/bucket/models"
    assert triton_s3_url("s3://bucket/m", "https://minio.local") == "s3://https://minio.local:443/bucket/m"
    assert triton_s3_url("s3://127.0.0.1:9000/b/m", "http://other:1") == "s3://127.0.0.1:9000/b/m"
    remote = remote_repository("s3://bucket/m", None, {"AWS_ENDPOINT_URL": "http://h:9"})
    assert remote.url == "s3://h:9/bucket/m" and ("AWS_DEFAULT_REGION", "us-east-1") in remote.environment


def test_server_arguments_load_models_at_start_without_exit_on_error_when_given() -> None:
    options = ServerOptions(load_models=("a", "b"))
    args = server_arguments("/r", options, Endpoints(1, 2, 3))
    assert "--load-model=a" in args and "--load-model=b" in args and "--exit-on-error=false" in args
    assert not any(a.startswith("--strict-readiness") for a in args)  # Triton's default in explicit mode
    poll = server_arguments("/r", ServerOptions(mode="poll", poll_seconds=1), Endpoints(1, 2, 3))
    assert "--repository-poll-secs=1" in poll and "--strict-readiness=false" in poll


@pytest.mark.parametrize("host", ["not a host", "", "a b", "-x", "1.2.3.4:5"])
def test_check_host_raises_user_error_when_not_an_address(host: str) -> None:
    with pytest.raises(UserError, match="--host"):
        check_host(host)


def test_check_host_accepts_addresses_and_names_when_well_formed() -> None:
    for host in ("127.0.0.1", "0.0.0.0", "::1", "localhost", "triton-0.svc.cluster.local"):
        assert check_host(host) == host


def test_check_distinct_ports_raises_user_error_when_two_endpoints_share_a_port() -> None:
    with pytest.raises(UserError, match="--grpc-port and --http-port are both 8001"):
        check_distinct_ports({"--grpc-port": 8001, "--http-port": 8001, "--metrics-port": None})


def test_error_roots_are_tool_and_refused_when_server_fails_or_refuses() -> None:
    assert isinstance(ServerError("x"), ToolError) and not isinstance(ServerError("x"), UserError)
    assert isinstance(ModelLoadError("m", "r"), RefusedError) and not isinstance(ModelLoadError("m", "r"), UserError)


def test_stub_log_parsers_find_hung_and_unsettled_models_when_logged() -> None:
    log = (
        'I1122 18:15:33.117503 1 model_lifecycle.cc:472] "loading: a:1"\n'
        'I1122 18:15:33.117503 1 model_lifecycle.cc:472] "loading: b:1"\n'
        "I1122 18:15:33.170498 2 pb_stub.cc:2105]  Failed to preinitialize Python stub: Python model file not "
        "found in '/tmp/x/repo/b/1/model.py'\n"
        'I1122 18:15:34.967660 1 model_lifecycle.cc:839] "successfully loaded \'a\'"\n'
    )
    assert failed_stubs(log) == {"b"}
    assert unsettled_models(log) == {"b"}


def test_write_scale_onnx_builds_a_graph_onnxruntime_runs(tmp_path: Path) -> None:
    import numpy as np
    import onnxruntime

    path = write_scale_onnx(tmp_path / "m.onnx")
    out = onnxruntime.InferenceSession(str(path)).run(None, {"X": np.ones((2, 4), np.float32)})[0]
    assert np.array_equal(out, np.full((2, 4), 3.0, np.float32))
