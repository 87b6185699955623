"""The options every ``build <family>`` takes, declared once: flag, destination, type, default and help.

``cli/build.py`` turns each record into its click option (``cli.options.family_option``, as for a family's own
options); ``BuildRequest`` takes its field defaults from ``REQUEST_DEFAULTS`` and ``CheckRequest`` (the
validation after the build) from ``CHECK_DEFAULTS`` (``--gpu/--no-gpu`` is every command's ``cli.options.gpu_option``);
``tests/pipelines/test_request_options.py`` checks that the CLI, the request and the docs agree. A record with
``per_family`` is read only by the families that list its ``dest`` in ``Family.shared_options``; the others
refuse it when given (``registry.check_shared_options``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from repo_builder.compile_recipe import PRECISIONS
from repo_builder.deploy_target import PLATFORMS, STEP_PACKAGES
from repo_builder.pipelines.option_record import FamilyOption
from repo_builder.pipelines.runtime import CHOICES
from repo_builder.precision.gate import DEFAULT_FALLBACK_SHARE, FALLBACKS
from repo_builder.render.context import (
    DEFAULT_MAX_IMAGE_PIXELS,
    DEFAULT_MAX_REQUEST_BYTES,
    DEFAULT_STEP_MEMORY_MIB,
)
from repo_builder.spec import DEFAULT_MAX_BATCH_SIZE
from repo_builder.validate.live_codes import DEFAULT_LOAD_TIMEOUT

__all__ = [
    "BUILD_OPTIONS", "CHECK_DEFAULTS", "CHECK_OPTIONS", "DEFAULT_LOAD_TIMEOUT", "NEGATED_FIELDS", "REQUEST_DEFAULTS",
    "SHARED_OPTIONS", "request_fields",
]

# In --help order.
BUILD_OPTIONS: tuple[FamilyOption, ...] = (
    FamilyOption(("--out",), "out", "Model repository folder to write into (created if missing).", kind="path", required=True),
    FamilyOption(("--name",), "name", "Ensemble name clients call; members are NAME_preprocess, NAME_model, NAME_postprocess."),
    FamilyOption(("--triton-release",), "triton_release",
                 "The Triton release whose stock py3 image the repository is built for (default: the newest known): "
                 "its Python and packages decide what ships with the Python steps, its backends the model step's runtime.",
                 metavar="YY.MM", conflicts_with_export=False),
    FamilyOption(("--platform",), "platform", "The server's CPU platform, for the packages shipped with the Python steps.",
                 default="x86_64", kind="choice", choices=PLATFORMS, conflicts_with_export=False),
    FamilyOption(("--step-packages",), "step_packages",
                 "ship: packages the image's Python lacks go inside the repository, built for its Python and platform; "
                 "dockerfile: write a Dockerfile (FROM the stock image, pinned installs) for an image that has them.",
                 default="ship", kind="choice", choices=STEP_PACKAGES, conflicts_with_export=False),
    FamilyOption(("--runtime",), "runtime",
                 "Model step: TensorRT plan, Triton's ONNX Runtime backend, or ONNX Runtime inside the Python backend. "
                 "auto: tensorrt with a GPU and TensorRT here, else the target image's ONNX Runtime backend "
                 "(python only when asked for).",
                 default="auto", kind="choice", choices=CHOICES),
    FamilyOption(("--max-batch-size",), "max_batch_size", "max_batch_size of every step (the ensemble never exceeds its members).",
                 default=DEFAULT_MAX_BATCH_SIZE, kind="int"),
    FamilyOption(("--version",), "version", "Version folder to write (default: the next free version of every step).", kind="int"),
    FamilyOption(("--force",), "force", "Replace an existing version folder.", kind="flag"),
    FamilyOption(("--replace",), "replace", "The ensemble's inputs or outputs may change (build refuses an API change in --out otherwise).",
                 kind="flag"),
    FamilyOption(("--templates",), "templates",
                 "Folder of Jinja2 templates overriding the shipped ones by name (templates are code: they run when rendered).",
                 kind="path"),
    FamilyOption(("--top-k",), "top_k", "How many labels and scores the ensemble returns.", default=5, kind="int", per_family=True),
    FamilyOption(("--labels",), "labels", "Labels file (one per line, in output order) instead of the model's own.", kind="path",
                 per_family=True),
    FamilyOption(("--defer-compile",), "defer_compile",
                 "tensorrt: write the ONNX and a compile recipe; build plans later with 'repo-builder compile-pending'.", kind="flag"),
    FamilyOption(("--precision",), "precision",
                 "The model step's precision, written into its ONNX for every runtime (fp16/bf16: a converted graph; int8: "
                 "Q/DQ nodes fitted on --calibration-data), then served and gated against fp32 on --accuracy-data by the "
                 "family's own metric; TensorRT 10 and 11 build it strongly typed.",
                 default="fp32", kind="choice", choices=PRECISIONS),
    FamilyOption(("--calibration-data",), "calibration_data",
                 "int8: images (a folder) or texts (a file, one per line) like those clients send; they go through the "
                 "served preprocessing to fit the scales.", kind="path"),
    FamilyOption(("--calibration-samples",), "calibration_samples", "int8: at most this many calibration samples.",
                 default=256, kind="int"),
    FamilyOption(("--accuracy-data",), "accuracy_data",
                 "--precision fp16|bf16|int8: data kept apart from calibration (checked by content); the reduced pipeline "
                 "must agree with the fp32 one on it.", kind="path"),
    FamilyOption(("--min-accuracy",), "min_accuracy",
                 "The gate's threshold on the family's headline figure (default: the family's; see docs/precision.md).",
                 kind="float"),
    FamilyOption(("--fallback",), "fallback",
                 "int8 below the threshold: auto returns the nodes int8 hurts most to float, a few at a time, until the "
                 "gate passes or --fallback-limit is reached; off fails at once.",
                 default="off", kind="choice", choices=FALLBACKS),
    FamilyOption(("--fallback-limit",), "fallback_limit", "The share of the quantizable nodes the fallback may return to float.",
                 default=DEFAULT_FALLBACK_SHARE, kind="float"),
    # --no-parity as in `export`; --skip-parity kept as an alias.
    FamilyOption(("--no-parity", "--skip-parity"), "skip_parity", "Skip the ONNX Runtime vs PyTorch parity check during export.",
                 kind="flag"),
    FamilyOption(("--instances",), "instances", "Model-step instances (default: 2 on 2+ cores, else 1); the pre/post steps have --step-instances.",
                 kind="int"),
    FamilyOption(("--intra-op-threads",), "intra_op_threads",
                 "ONNX Runtime threads per model-step instance (default: cores // instances; 0: decide at load on the serving machine).",
                 kind="int"),
    FamilyOption(("--step-instances",), "step_instances",
                 "Instances of each Python pre/post step (default: 1, which batches more requests per execution; "
                 "the image decoding step: 2 on 2+ cores, so photos decode on every core).",
                 kind="int"),
    FamilyOption(("--max-image-pixels",), "max_image_pixels",
                 "Image steps: refuse an image whose header declares more pixels (width x height), before decoding it "
                 "(default: Pillow's decompression-bomb warning limit).",
                 default=DEFAULT_MAX_IMAGE_PIXELS, kind="int"),
    FamilyOption(("--max-request-bytes",), "max_request_bytes",
                 "Pre/post steps facing clients: refuse a request whose inputs hold more bytes (default: 64 MiB).",
                 default=DEFAULT_MAX_REQUEST_BYTES, kind="int"),
    FamilyOption(("--step-memory-mib",), "step_memory_mib",
                 "Per instance of such a step: admit a batch's requests while their worst-case memory fits this budget, "
                 "answer the rest 'busy' (UNAVAILABLE) instead of running out of memory (default: 2048).",
                 default=DEFAULT_STEP_MEMORY_MIB, kind="int"),
)


# The validation build ends with: the same flags as `repo-builder validate` (and --gpu/--no-gpu), in --help order.
CHECK_OPTIONS: tuple[FamilyOption, ...] = (
    FamilyOption(("--strict",), "strict", "Validate as Triton with --disable-auto-complete-config: configs must be complete.", kind="flag"),
    FamilyOption(("--allow-pending",), "allow_pending", "TensorRT plans still to be compiled are warnings (implied by --defer-compile).",
                 kind="flag"),
    FamilyOption(("--live",), "live", "After building, load every model into the embedded Triton and send one request per ensemble "
                 "(runs the generated model.py files).", kind="flag"),
    FamilyOption(("--tritonserver",), "tritonserver", "--live: this tritonserver binary instead of the embedded one.", kind="path"),
    FamilyOption(("--load-timeout",), "load_timeout", "--live: per-model load timeout.", default=DEFAULT_LOAD_TIMEOUT, kind="float",
                 metavar="SECONDS"),
    FamilyOption(("--allow-unproven",), "allow_unproven",
                 "--live: models the embedded server cannot load here (TensorRT without a GPU) do not fail the build.", kind="flag"),
)

# Flags whose request field says the opposite (dest -> field): --no-parity fills check_parity=False.
NEGATED_FIELDS: Mapping[str, str] = {"skip_parity": "check_parity"}

# Shared build options a family may read; any other family refuses them if given.
SHARED_OPTIONS: tuple[str, ...] = tuple(o.dest for o in BUILD_OPTIONS if o.per_family)


def _field_default(option: FamilyOption) -> Any:
    value = False if option.kind == "flag" else option.default
    return not value if option.dest in NEGATED_FIELDS else value


# BuildRequest's (CheckRequest's) field -> its default: what the CLI passes when the flag is not given.
REQUEST_DEFAULTS: Mapping[str, Any] = {NEGATED_FIELDS.get(o.dest, o.dest): _field_default(o) for o in BUILD_OPTIONS if not o.required}
CHECK_DEFAULTS: Mapping[str, Any] = {o.dest: _field_default(o) for o in CHECK_OPTIONS}


def request_fields(values: Mapping[str, Any], options: tuple[FamilyOption, ...] = BUILD_OPTIONS) -> dict[str, Any]:
    """The request's fields from parsed option values by ``dest`` (the click callback's keywords)."""
    fields = {}
    for option in options:
        value = values[option.dest]
        if option.dest in NEGATED_FIELDS:
            fields[NEGATED_FIELDS[option.dest]] = not value
        else:
            fields[option.dest] = value
    return fields
