"""The codes ``validate --live`` adds to a report (RB9xx); docs/rules.md lists them from ``LIVE_CODES``."""

from __future__ import annotations

from dataclasses import dataclass

from repo_builder.validate.records import Severity

DEFAULT_LOAD_TIMEOUT = 60.0  # seconds per model under --live (validate --load-timeout, build --check --load-timeout)


@dataclass(frozen=True)
class LiveCode:
    code: str
    rule: str
    severity: Severity
    doc: str


REFUSED = LiveCode(
    "RB901",
    "server-refused-model",
    Severity.ERROR,
    "The real tritonserver refused to load the model for a configuration or layout reason. The message is "
    "the server's reason (from its log when the client only hears 'failed to poll from model "
    "repository'); for a model served through the ONNX Runtime stand-in, the ONNX Runtime backend's own "
    "message.",
)
DISAGREEMENT = LiveCode(
    "RB902",
    "offline-live-disagreement",
    Severity.WARNING,
    "The offline checks and the real server reached different verdicts on the model for a configuration "
    "or layout reason; the message says which way. The server is the referee: an offline rule is missing "
    "or wrong. Never reported for failures inside the model's own code (RB905) or slow loads (RB906), "
    "which no offline rule can know.",
)
INFERENCE_FAILED = LiveCode(
    "RB903",
    "live-inference-failed",
    Severity.ERROR,
    "The ensemble loaded but did not answer one request. The diagnostic points at the step whose code "
    "failed, in your repository (STEP/1/model.py and the line), when the server's message names it. The "
    "request carries real inputs when there are any: the files of --input [MODEL:]NAME=FILE, else, for a "
    "repository repo-builder built, its family's real sample (a JPEG photo for image classifiers, English "
    "sentences for text classifiers; the task recorded in repo-builder.json). Then this is an error: the "
    "pipeline cannot answer a real request. With only synthesized inputs (shapes with -1 made small, the "
    "configured data types, short text for TYPE_STRING, a tiny PNG for encoded-image inputs) the values "
    "may mean nothing to the model, so it is a warning and the summary says 'not proven: N ensemble(s) "
    "did not answer'; gate on it with --fail-on warning, or give real inputs with --input.",
)
NOT_PROVEN = LiveCode(
    "RB904",
    "live-not-proven",
    Severity.ERROR,
    "The server at hand could not load the model, so --live proves nothing about it: its backend is not "
    "installed (the embedded Triton of nvidia-pytriton has only the Python backend; ONNX Runtime models "
    "are proven through a stand-in, TensorRT and the others are not), it needs a GPU, or an ensemble uses "
    "such a model. An error, so --live never passes what it never loaded; a warning with "
    "--allow-unproven. Run validate --live --tritonserver PATH with a full Triton on the target hardware "
    "to prove it.",
)
MODEL_CODE_FAILED = LiveCode(
    "RB905",
    "live-model-code-failed",
    Severity.ERROR,
    "The server accepted the configuration, but the model's own code failed while loading (a Python "
    "model's import or initialize() raised: a missing pip module, no network, a missing file it opens), "
    "its process died under it (initialize() called exit(), or a signal killed the Python stub: the "
    "server only says 'Stub process ... is not healthy'), or its warmup request failed the same ways, or "
    "took the whole server down (--live then restarts it for the remaining models). The detail is the "
    "last lines of the model's traceback, of what its process printed, or of the server's log. No "
    "offline rule can know this: it never counts as an offline/live disagreement.",
)
TIMED_OUT = LiveCode(
    "RB906",
    "live-load-timed-out",
    Severity.ERROR,
    "The model did not finish loading within --load-timeout seconds (the message gives the time waited "
    "and the setting); the server was restarted to go on. A slow model is not a refused one: raise "
    "--load-timeout if it is expected to take that long.",
)
STAND_IN = LiveCode(
    "RB907",
    "live-proven-through-stand-in",
    Severity.INFO,
    "The ONNX Runtime model was proven through a stand-in: the embedded Triton has no ONNX Runtime "
    "backend, so a staged copy serves it with a Python model that first performs the ONNX Runtime "
    "backend's own load-time checks (input and output names, data types, dims against the ONNX graph, "
    "the batch dimension; onnxruntime_backend src/onnxruntime.cc) with that backend's messages, then runs "
    "the same ONNX file with onnxruntime. The user's repository is never changed.",
)
WRONG_ANSWER = LiveCode(
    "RB908",
    "live-answer-wrong",
    Severity.ERROR,
    "The ensemble answered a request with real inputs (see RB903), but the answer is not what its config "
    "declares: an output is missing, or has another data type or shape (-1 matches any size); or it "
    "fails its family's check (classifiers: scores are probabilities in [0, 1], best first, summing to at "
    "most 1 and to 1 when the top-k covers every class; class ids distinct). Clients would get answers "
    "they cannot read.",
)
LIVE_CODES: tuple[LiveCode, ...] = (
    REFUSED,
    DISAGREEMENT,
    INFERENCE_FAILED,
    NOT_PROVEN,
    MODEL_CODE_FAILED,
    TIMED_OUT,
    STAND_IN,
    WRONG_ANSWER,
)
