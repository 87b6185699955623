"""Random small repositories for holding the offline validator against the real server.

A case is a few Python-backend models and ensembles over them, each with at most one mutation that the
server can judge on a CPU machine (version folders, names, missing model.py, IO, batching, instance
groups, ensemble wiring, versions, batch sizes, dtypes and shapes). ``judge_case`` writes a case, runs
the offline validator and the real server on it, and returns both verdicts per model.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path

from hypothesis import strategies as st

from repo_builder.live.judge import LiveSettings, judge_repository
from repo_builder.triton.server import TritonServer
from repo_builder.validate.engine import validate_repository
from repo_builder.validate.records import ValidateOptions
from repo_builder.validate.scan import scan_repository
from support.triton_repo_factory import GENERIC_MODEL_PY

DTYPES = ("TYPE_FP32", "TYPE_INT32", "TYPE_STRING")
DIMS = ((4,), (-1,), (2, 3))
MODEL_MUTATIONS = (
    "version_leading_zero",
    "version_non_numeric",
    "version_zero",
    "version_two",
    "policy_specific_missing",
    "policy_specific_present",
    "policy_all",
    "name_mismatch",
    "missing_model_py",
    "no_class",
    "syntax_error",
    "missing_data_type",
    "missing_dims",
    "dim_zero",
    "dim_minus_two",
    "reshape_bad",
    "reshape_ok",
    "negative_max_batch_size",
    "dynamic_batching",
    "preferred_too_big",
    "preferred_ok",
    "kind_gpu",
    "kind_cpu_two",
    "no_config",
    "parse_error",
    "platform_onnx_backend_python",
    "platform_ensemble_with_model_py",
    "duplicate_input",
    "input_output_same_name",
    "no_inputs",
    "hidden_dir",
    "config_dir",
    "model_py_as_dir",
    "default_model_filename_missing",
    "default_model_filename_present",
    "output_missing_data_type",
    "policy_latest_zero",
    "kind_model",
    "kind_cpu_with_gpus",
    "kind_cpu_zero",
    "warmup_bad_input",
    "warmup_ok",
    "warmup_dtype_mismatch",
    "warmup_dims_mismatch",
    "response_cache",
)
ENSEMBLE_MUTATIONS = (
    "no_version_dir",
    "empty_version_dir",
    "missing_member",
    "unused_input",
    "unwritten_output",
    "bad_input_key",
    "bad_output_key",
    "max_batch_size_too_big",
    "max_batch_size_smaller",
    "dtype_mismatch",
    "shape_mismatch",
    "version_missing",
    "version_omitted",
    "version_one",
    "instance_group",
    "output_mapped_twice",
    "no_steps",
    "self_reference",
    "dynamic_batching",
)


@dataclass(frozen=True)
class ModelCase:
    name: str
    max_batch_size: int
    in_dtype: str
    in_dims: tuple[int, ...]
    out_dtype: str
    out_dims: tuple[int, ...]
    mutation: str | None = None


@dataclass(frozen=True)
class EnsembleCase:
    name: str
    members: tuple[str, ...]  # steps in order; each step feeds the next
    mutation: str | None = None


@dataclass(frozen=True)
class RepoCase:
    models: tuple[ModelCase, ...]
    ensembles: tuple[EnsembleCase, ...] = field(default=())

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1)


def _dims(dims: tuple[int, ...]) -> str:
    return ", ".join(map(str, dims))


def _tensor(name: str, dtype: str | None, dims: tuple[int, ...] | None, extra: str = "") -> str:
    parts = [f'name: "{name}"']
    if dtype is not None:
        parts.append(f"data_type: {dtype}")
    if dims is not None:
        parts.append(f"dims: [{_dims(dims)}]")
    if extra:
        parts.append(extra)
    return "{ " + " ".join(parts) + " }"


# Mutations that only append a fixed block to the model's config.
_MODEL_TAILS = {
    "dynamic_batching": "dynamic_batching { }\n",
    "kind_gpu": "instance_group [{ kind: KIND_GPU }]\n",
    "kind_cpu_two": "instance_group [{ count: 2 kind: KIND_CPU }]\n",
    "policy_specific_missing": "version_policy { specific { versions: [3] } }\n",
    "policy_specific_present": "version_policy { specific { versions: [1] } }\n",
    "policy_all": "version_policy { all { } }\n",
    "default_model_filename_missing": 'default_model_filename: "other.py"\n',
    "default_model_filename_present": 'default_model_filename: "other.py"\n',
    "policy_latest_zero": "version_policy { latest { num_versions: 0 } }\n",
    "kind_model": "instance_group [{ kind: KIND_MODEL }]\n",
    "kind_cpu_with_gpus": "instance_group [{ kind: KIND_CPU gpus: [0] }]\n",
    "kind_cpu_zero": "instance_group [{ count: 0 kind: KIND_CPU }]\n",
    "response_cache": "response_cache { enable: true }\n",
    "parse_error": "max_batch_size: oops\n",
}
_MODEL_HEADS = {
    "name_mismatch": lambda m: f'name: "{m.name}_other"\nbackend: "python"\n',
    "platform_onnx_backend_python": lambda m: 'platform: "onnxruntime_onnx"\nbackend: "python"\n',
    "platform_ensemble_with_model_py": lambda m: 'platform: "ensemble"\n',
}
_INPUT_DIMS = {"missing_dims": None, "dim_zero": (0,), "dim_minus_two": (-2,)}


def _model_input(m: ModelCase) -> str:
    mut = m.mutation or ""
    dtype = None if mut == "missing_data_type" else m.in_dtype
    dims = _INPUT_DIMS.get(mut, m.in_dims)  # missing_dims maps to None on purpose
    extra = ""
    if mut == "reshape_bad":
        extra = "reshape { shape: [7, 5] }"
    if mut == "reshape_ok" and -1 not in m.in_dims:
        size = 1
        for d in m.in_dims:
            size *= d
        extra = f"reshape {{ shape: [{size}] }}"
    return _tensor("INPUT0", dtype, dims, extra)


def _preferred_tail(m: ModelCase) -> str:
    if m.mutation == "preferred_too_big":
        return f"dynamic_batching {{ preferred_batch_size: [{max(m.max_batch_size, 1) * 2}] }}\n"
    if m.mutation == "preferred_ok":
        return f"dynamic_batching {{ preferred_batch_size: [{max(m.max_batch_size, 1)}] }}\n"
    return ""


def _warmup_tail(m: ModelCase) -> str:
    mut = m.mutation
    if mut in ("warmup_bad_input", "warmup_ok"):
        name = "NOPE" if mut == "warmup_bad_input" else "INPUT0"
        dims = _dims(tuple(1 if d < 0 else d for d in m.in_dims))
        batch = "batch_size: 1 " if m.max_batch_size > 0 else ""
        return (
            f'model_warmup [{{ name: "w" {batch}inputs {{ key: "{name}" value: '
            f"{{ data_type: {m.in_dtype} dims: [{dims}] zero_data: true }} }} }}]\n"
        )
    if mut in ("warmup_dtype_mismatch", "warmup_dims_mismatch"):
        # batch_size 1 even without batching, so Triton runs the sample; dims exclude the batch dimension
        fixed = tuple(1 if d < 0 else d for d in m.in_dims)
        dtype = m.in_dtype
        if mut == "warmup_dtype_mismatch":
            dtype = "TYPE_FP32" if m.in_dtype == "TYPE_INT32" else "TYPE_INT32"
        else:
            fixed += (2,)  # one dimension too many never matches, -1 or not
        return (
            'model_warmup [{ name: "w" batch_size: 1 inputs { key: "INPUT0" value: '
            f"{{ data_type: {dtype} dims: [{_dims(fixed)}] random_data: true }} }} }}]\n"
        )
    return ""


def model_config(m: ModelCase) -> str:
    mut = m.mutation or ""
    mbs = -1 if mut == "negative_max_batch_size" else m.max_batch_size
    head = _MODEL_HEADS[mut](m) if mut in _MODEL_HEADS else 'backend: "python"\n'
    inputs = [_model_input(m)]
    if mut == "duplicate_input":
        inputs.append(_tensor("INPUT0", m.in_dtype, m.in_dims))
    out_name = "INPUT0" if mut == "input_output_same_name" else "OUTPUT0"
    out_dtype: str | None = None if mut == "output_missing_data_type" else m.out_dtype
    text = head + f"max_batch_size: {mbs}\n"
    if mut != "no_inputs":
        text += "input [\n  " + ",\n  ".join(inputs) + "\n]\n"
    text += f"output [\n  {_tensor(out_name, out_dtype, m.out_dims)}\n]\n"
    # One mutation per model: at most one of these adds anything.
    return text + _preferred_tail(m) + _MODEL_TAILS.get(mut, "") + _warmup_tail(m)


def write_model(root: Path, m: ModelCase) -> None:
    folder = root / m.name
    folder.mkdir()
    mut = m.mutation
    if mut == "config_dir":
        (folder / "config.pbtxt").mkdir()
    elif mut != "no_config":
        (folder / "config.pbtxt").write_text(model_config(m), encoding="utf-8")
    versions = {
        "version_leading_zero": ("01",),
        "version_non_numeric": ("v1",),
        "version_zero": ("0",),
        "version_two": ("1", "2"),
        "policy_all": ("1", "2"),
    }.get(mut or "", ("1",))
    body = GENERIC_MODEL_PY
    if mut == "no_class":
        body = "import numpy\n\nclass Model:\n    pass\n"
    if mut == "syntax_error":
        body = "class TritonPythonModel(:\n    pass\n"
    for v in versions:
        (folder / v).mkdir()
        if mut == "missing_model_py":
            continue
        if mut == "model_py_as_dir":
            (folder / v / "model.py").mkdir()
            continue
        (folder / v / "model.py").write_text(body, encoding="utf-8")
        if mut == "default_model_filename_present":
            (folder / v / "other.py").write_text(body, encoding="utf-8")


def _batch_dims(model: ModelCase, dims: tuple[int, ...], ensemble_mbs: int) -> tuple[int, ...]:
    """The member's tensor seen from the ensemble: a batching member under a non-batching ensemble gets -1."""
    return (-1, *dims) if ensemble_mbs == 0 and model.max_batch_size > 0 else dims


_STEP_VERSIONS = {"version_missing": " model_version: 7", "version_omitted": "", "version_one": " model_version: 1"}
_ENSEMBLE_TAILS = {"instance_group": "instance_group [{ kind: KIND_CPU }]\n", "dynamic_batching": "dynamic_batching { }\n"}


def _ensemble_batch(e: EnsembleCase, members: list[ModelCase]) -> int:
    batching = [m.max_batch_size for m in members]
    mbs = min(batching) if all(b > 0 for b in batching) else 0
    if e.mutation == "max_batch_size_too_big":
        mbs = max(batching) * 2 if max(batching) > 0 else 4
    if e.mutation == "max_batch_size_smaller" and mbs > 1:
        mbs -= 1
    return mbs


def _ensemble_io(e: EnsembleCase, members: list[ModelCase], mbs: int) -> tuple[list[str], list[str]]:
    mut, first, last = e.mutation, members[0], members[-1]
    in_dtype, in_dims = first.in_dtype, _batch_dims(first, first.in_dims, mbs)
    if mut == "dtype_mismatch":
        in_dtype = "TYPE_INT64"
    if mut == "shape_mismatch":
        in_dims = (*in_dims[:-1], 9)
    inputs = [_tensor("E_IN", in_dtype, in_dims)]
    if mut == "unused_input":
        inputs.append(_tensor("E_UNUSED", "TYPE_FP32", (4,)))
    return inputs, [_tensor("E_OUT", last.out_dtype, _batch_dims(last, last.out_dims, mbs))]


def _step_names(e: EnsembleCase) -> list[str]:
    names = list(e.members)
    if e.mutation == "missing_member":
        names[-1] = names[-1] + "_absent"
    if e.mutation == "self_reference":
        names[-1] = e.name
    return names


def _steps(e: EnsembleCase, names: list[str]) -> list[str]:
    mut, last = e.mutation, len(names) - 1
    version = _STEP_VERSIONS.get(mut or "", " model_version: -1")
    steps = []
    for i, name in enumerate(names):
        src = "E_IN" if i == 0 else f"T{i}"
        dst = "E_OUT" if i == last else f"T{i + 1}"
        if mut == "unwritten_output" and i == last:
            dst = "E_SIDE"
        in_key = "WRONG" if mut == "bad_input_key" and i == 0 else "INPUT0"
        out_key = "WRONG" if mut == "bad_output_key" and i == last else "OUTPUT0"
        steps.append(
            f'{{ model_name: "{name}"{version} input_map {{ key: "{in_key}" value: "{src}" }}'
            f' output_map {{ key: "{out_key}" value: "{dst}" }} }}'
        )
    if mut == "output_mapped_twice":
        steps.append(
            f'{{ model_name: "{names[-1]}" model_version: -1 input_map {{ key: "INPUT0" value: "E_IN" }}'
            f' output_map {{ key: "OUTPUT0" value: "E_OUT" }} }}'
        )
    return steps


def ensemble_config(e: EnsembleCase, models: dict[str, ModelCase]) -> str:
    members = [models[n] for n in e.members if n in models]
    mbs = _ensemble_batch(e, members)
    inputs, outputs = _ensemble_io(e, members, mbs)
    text = f'platform: "ensemble"\nmax_batch_size: {mbs}\n'
    text += "input [\n  " + ",\n  ".join(inputs) + "\n]\n"
    text += "output [\n  " + ",\n  ".join(outputs) + "\n]\n"
    text += _ENSEMBLE_TAILS.get(e.mutation or "", "")
    if e.mutation == "no_steps":
        return text + "ensemble_scheduling { }\n"
    steps = _steps(e, _step_names(e))
    return text + "ensemble_scheduling {\n  step [\n    " + ",\n    ".join(steps) + "\n  ]\n}\n"


def write_ensemble_case(root: Path, e: EnsembleCase, models: dict[str, ModelCase]) -> None:
    folder = root / e.name
    folder.mkdir()
    (folder / "config.pbtxt").write_text(ensemble_config(e, models), encoding="utf-8")
    if e.mutation == "no_version_dir":
        return
    (folder / "1").mkdir()
    if e.mutation != "empty_version_dir":
        (folder / "1" / ".keep").write_text("", encoding="utf-8")


def write_case(root: Path, case: RepoCase) -> None:
    """Write ``case`` into ``root`` (emptied first)."""
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    models = {m.name: m for m in case.models}
    for m in case.models:
        if m.mutation == "hidden_dir":
            m = ModelCase(**{**asdict(m), "name": "." + m.name, "mutation": None})
        write_model(root, m)
    for e in case.ensembles:
        write_ensemble_case(root, e, models)


@st.composite
def model_cases(draw: st.DrawFn, name: str, mutation_rate: float = 0.6) -> ModelCase:
    mutate = draw(st.floats(0, 1)) < mutation_rate
    return ModelCase(
        name=name,
        max_batch_size=draw(st.sampled_from((0, 4, 8))),
        in_dtype=draw(st.sampled_from(DTYPES)),
        in_dims=draw(st.sampled_from(DIMS)),
        out_dtype=draw(st.sampled_from(DTYPES)),
        out_dims=draw(st.sampled_from(DIMS)),
        mutation=draw(st.sampled_from(MODEL_MUTATIONS)) if mutate else None,
    )


@st.composite
def repo_cases(draw: st.DrawFn, prefix: str = "m") -> RepoCase:
    """2-3 Python models (often sharing one IO so ensembles chain cleanly) and 0-2 ensembles over them."""
    count = draw(st.integers(2, 3))
    models = []
    shared = draw(st.booleans())
    for i in range(count):
        m = draw(model_cases(f"{prefix}_p{i}"))
        if shared:
            m = ModelCase(m.name, 8, "TYPE_FP32", (4,), "TYPE_FP32", (4,), m.mutation)
        models.append(m)
    names = [m.name for m in models]
    ensembles = []
    for j in range(draw(st.integers(0, 2))):
        members = tuple(draw(st.lists(st.sampled_from(names), min_size=1, max_size=2)))
        mutate = draw(st.floats(0, 1)) < 0.5
        mutation = draw(st.sampled_from(ENSEMBLE_MUTATIONS)) if mutate else None
        ensembles.append(EnsembleCase(f"{prefix}_e{j}", members, mutation))
    return RepoCase(tuple(models), tuple(ensembles))


@dataclass(frozen=True)
class Comparison:
    model: str
    offline_ok: bool
    live_loaded: bool
    offline_errors: tuple[str, ...]  # "RB123: message"
    live_reason: str | None

    @property
    def agrees(self) -> bool:
        return self.offline_ok == self.live_loaded


def judge_folder(server: TritonServer, root: Path, load_timeout: float = 30.0) -> list[Comparison]:
    """Offline and live verdicts for every model of the repository at ``root`` (the server's repository).

    Leaves nothing loaded, so the next case starts clean on the same server.
    """
    # The referee is this machine (no GPU): judge offline for the same target, not the default GPU fleet.
    report = validate_repository(root, ValidateOptions(gpu_present=False))
    verdicts = judge_repository(
        server, scan_repository(root), LiveSettings(load_timeout=load_timeout, infer=False)
    )
    out = []
    for summary in report.models:
        verdict = verdicts[summary.name]
        errors = tuple(
            f"{d.code}: {d.message}" for d in report.for_model(summary.name) if d.severity == "error"
        )
        out.append(Comparison(summary.name, summary.ok, verdict.loaded, errors, verdict.result.reason))
    # Ensembles first, so no member is held by a loaded ensemble.
    for name in sorted(
        verdicts, key=lambda n: not (report.repository.model(n) and report.repository.model(n).is_ensemble)
    ):
        if verdicts[name].loaded:
            server.unload(name)
    return out


def describe(comparisons: list[Comparison]) -> str:
    lines = []
    for c in comparisons:
        if c.agrees:
            continue
        side = "offline ok, server refused" if c.offline_ok else "offline refused, server loaded"
        lines.append(f"{c.model}: {side}; offline: {list(c.offline_errors)}; server: {c.live_reason}")
    return "\n".join(lines)


def with_prefix(case: RepoCase, prefix: str) -> RepoCase:
    """The same case with every name's prefix (up to the first '_') replaced: unique names per example."""

    def rename(name: str) -> str:
        return prefix + name[name.index("_") :] if "_" in name else name

    return RepoCase(
        tuple(ModelCase(**{**asdict(m), "name": rename(m.name)}) for m in case.models),
        tuple(
            EnsembleCase(rename(e.name), tuple(rename(n) for n in e.members), e.mutation)
            for e in case.ensembles
        ),
    )


# Mutations after which the server must be restarted (a hung load, a crash): swept on their own, since a
# restart unloads everything and the ensembles after it would load their members again.
RESTARTING = frozenset({"missing_model_py", "default_model_filename_missing", "config_dir"})


def sweep_cases() -> dict[str, RepoCase]:
    """Every mutation once: each model mutation (those that make the server restart with an ensemble over
    each); each ensemble mutation over a batching pair of members (shared, so few Python stubs start)."""
    models = [
        ModelCase(f"s_p{i}", 8, "TYPE_FP32", (4,), "TYPE_FP32", (4,), mutation)
        for i, mutation in enumerate(MODEL_MUTATIONS)
    ]

    def with_ensembles(chosen: list[ModelCase]) -> RepoCase:
        return RepoCase(
            tuple(chosen), tuple(EnsembleCase(m.name.replace("_p", "_e"), (m.name,)) for m in chosen)
        )

    pair = (
        ModelCase("t_p0", 8, "TYPE_FP32", (4,), "TYPE_FP32", (4,)),
        ModelCase("t_p1", 4, "TYPE_FP32", (4,), "TYPE_FP32", (4,)),
    )
    over_pair = tuple(
        EnsembleCase(f"t_e{j}", ("t_p0", "t_p1"), mutation) for j, mutation in enumerate(ENSEMBLE_MUTATIONS)
    )
    return {
        # No ensembles here: loading one reloads its (already loaded) members, which doubles the time.
        "models": RepoCase(tuple(m for m in models if m.mutation not in RESTARTING)),
        "restarting-models": with_ensembles([m for m in models if m.mutation in RESTARTING]),
        "ensembles": RepoCase(pair, over_pair),
    }
