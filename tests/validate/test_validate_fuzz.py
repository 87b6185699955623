"""Property-based fuzzing of offline validate (issue 20 item 9, issue 28 item 5).

Hypothesis generates repositories: model folders with names from hostile alphabets (control characters,
bidi overrides, ``::`` workflow commands, ``%``, undecodable bytes), configs mutated as text (slices cut,
repeated or spliced with hostile bytes, enum and dim numbers replaced, JSON-like nesting), random ONNX IO
(any element type number, symbolic and negative dims, truncated files), ``model.py`` files (valid,
nested 100,000 deep, binary), ``plan.json`` sidecars, plan headers, labels, warmup data and the manifest.
Then at any path validate reads, a file kind is swapped in: a FIFO, a socket, a character device, a
folder, a symlink out of the repository (to a canary), to ``/dev/zero``, in a loop, dangling, or inside.

Each repository is validated in a child process, in JSON, SARIF and JUnit at once, with a time limit, an
address-space limit and a peak-memory bound. The test asserts: no exit 4 or traceback; every report is
well-formed; the human text report holds no raw control character and no line starting with ``::``;
nothing outside the repository was opened (``strace`` when installed: every file the child opened
successfully, resolved, lies outside the scratch root or inside the repository/report folder; always:
the canary's access time did not move); no byte changed in the scratch root outside the report folder,
and nothing was created or written outside it.

``REPO_BUILDER_VALIDATE_FUZZ_EXAMPLES`` sets the number of repositories (CI default: 8);
``scripts/fuzz-validate --examples 500`` runs a longer search.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import resource
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = int(os.environ.get("REPO_BUILDER_VALIDATE_FUZZ_EXAMPLES", "8"))
TIME_LIMIT_S = 60.0  # per repository; a few seconds is normal, more under strace on a loaded machine
MAX_RSS_BYTES = 400 << 20  # validate needs ~60 MB; a read of /dev/zero took 24 GB before issue 28
ADDRESS_SPACE_BYTES = 3 << 30
STRACE = shutil.which("strace")
CANARY_TEXT = "ghp_CANARY_SECRET_4242"

HOSTILE_CHARS = [
    "\n", "\r", "\t", "\x07", "\x1b", "\x1b[31m", "\x1b]0;t\x07", "\x7f", "\x9b", "\u202e", "\u2066", "\u200f",
    "::", "::warning file=x::", "%", "%0A", ",", " ", "'", '"', "\\", "é", "名", "\U0001f600", "..", "-", "x",
]
VERSION_NAMES = ("0", "01", "-1", "2", "99999999999999999999", "warmup", "configs", " 3", "1a", "\x1b[2J")
KINDS = ("fifo", "socket", "device", "folder", "link_out", "link_zero", "link_loop", "link_dangling", "link_inside")

PYTHON_CONFIG = """name: "{name}"
backend: "python"
max_batch_size: 4
input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] }} ]
output [ {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] label_filename: "labels.txt" }} ]
model_warmup [ {{ name: "w" batch_size: 1 inputs {{ key: "INPUT0" value {{ data_type: TYPE_FP32 dims: [ 4 ] input_data_file: "w.bin" }} }} }} ]
"""
ONNX_CONFIG = """name: "{name}"
platform: "onnxruntime_onnx"
max_batch_size: 0
input [ {{ name: "x" data_type: TYPE_FP32 dims: [ -1, 3 ] }} ]
output [ {{ name: "y" data_type: TYPE_FP32 dims: [ -1, 3 ] }} ]
"""
PLAN_CONFIG = """name: "{name}"
platform: "tensorrt_plan"
max_batch_size: 8
input [ {{ name: "input_ids" data_type: TYPE_INT64 dims: [ -1 ] }} ]
output [ {{ name: "logits" data_type: TYPE_FP32 dims: [ 2 ] }} ]
instance_group [ {{ kind: KIND_GPU count: 1 }} ]
"""
ENSEMBLE_CONFIG = """name: "{name}"
platform: "ensemble"
max_batch_size: 4
input [ {{ name: "IN" data_type: TYPE_FP32 dims: [ 4 ] }} ]
output [ {{ name: "OUT" data_type: TYPE_FP32 dims: [ 4 ] }} ]
ensemble_scheduling {{ step [ {{ model_name: "{member}" model_version: -1 input_map {{ key: "INPUT0" value: "IN" }} output_map {{ key: "OUTPUT0" value: "OUT" }} }} ] }}
"""
MODEL_PY = "import triton_python_backend_utils as pb_utils\n\nclass TritonPythonModel:\n    def execute(self, requests):\n        return []\n"
PLAN_JSON = {"format": 1, "plans": {"model.plan": {
    "tensorrt_version": "10.3.0.26", "compute_capability": "8.6", "profiles": [],
    "inputs": [{"name": "input_ids", "dtype": "INT64", "shape": [-1, -1]}],
    "outputs": [{"name": "logits", "dtype": "FLOAT", "shape": [-1, 2]}]}}}


@dataclass(frozen=True)
class Swap:
    """Replace the file at ``target`` (relative to the repository) with a file of ``kind``."""

    target: str
    kind: str


def onnx_bytes(data: st.DataObject) -> bytes:
    """A small ONNX model with random IO (element types include numbers ONNX does not name)."""
    from onnx import TensorProto, helper

    def tensor(prefix: str, i: int) -> object:
        elem = data.draw(st.sampled_from([1, 1, 6, 7, 10, 11, 16, 0, 99, -3]))
        dims = data.draw(st.lists(st.one_of(st.integers(-2, 5), st.sampled_from(["b", "seq", ""])), max_size=4))
        return helper.make_tensor_value_info(f"{prefix}{i}", elem if elem > 0 else TensorProto.FLOAT, dims)

    n_in = data.draw(st.integers(0, 3))
    n_out = data.draw(st.integers(1, 3))
    inputs = [tensor("x", i) for i in range(n_in)]
    outputs = [tensor("y", i) for i in range(n_out)]
    nodes = [helper.make_node("Identity", [f"x{min(i, n_in - 1)}" if n_in else "c"], [f"y{i}"]) for i in range(n_out)]
    init = [] if n_in else [helper.make_tensor("c", TensorProto.FLOAT, [1], [1.0])]
    model = helper.make_model(helper.make_graph(nodes, "g", inputs, outputs, initializer=init))
    raw = model.SerializeToString()
    if data.draw(st.booleans()):
        raw = raw[: data.draw(st.integers(0, len(raw)))]  # damaged
    return raw


def mutate_text(data: st.DataObject, text: str) -> str:
    """A few random edits of config text: cut, repeat, splice hostile characters, replace numbers."""
    for _ in range(data.draw(st.integers(0, 4))):
        op = data.draw(st.sampled_from(["cut", "repeat", "splice", "number", "nest", "enum"]))
        i = data.draw(st.integers(0, len(text)))
        j = data.draw(st.integers(i, min(len(text), i + 80)))
        if op == "cut":
            text = text[:i] + text[j:]
        elif op == "repeat":
            text = text[:j] + text[i:j] * data.draw(st.integers(2, 50)) + text[j:]
        elif op == "splice":
            text = text[:i] + "".join(data.draw(st.lists(st.sampled_from(HOSTILE_CHARS), max_size=6))) + text[i:]
        elif op == "number":
            text = re.sub(r"-?\d+", str(data.draw(st.sampled_from([0, -1, -2, 99, 2**31, 2**63, 10**30]))), text, count=1)
        elif op == "nest":
            depth = data.draw(st.sampled_from([50, 200, 5000]))
            text = text[:i] + "parameters { key: \"k\" value: " * 1 + "{" * depth + "}" * depth + text[i:]
        else:
            text = text.replace("TYPE_FP32", data.draw(st.sampled_from(["99", "0", "-1", "TYPE_BF16", "2147483647"])), 1)
    return text


def _config_text(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.:-]", "", name) or "m"


def write_model(data: st.DataObject, repo: Path, name: str, kind: str, member: str) -> list[str]:
    """One model folder; returns the paths (relative to ``repo``) validate reads for it."""
    folder = repo / name
    version = folder / "1"
    version.mkdir(parents=True, exist_ok=True)
    for extra in data.draw(st.lists(st.sampled_from(VERSION_NAMES), max_size=2, unique=True)):
        (folder / extra).mkdir(exist_ok=True)  # layout: ignored, reserved and overflowing version folders
    template = {"python": PYTHON_CONFIG, "onnx": ONNX_CONFIG, "plan": PLAN_CONFIG, "ensemble": ENSEMBLE_CONFIG}[kind]
    # Names reach the config only as valid text (a hostile name there makes most configs fail to parse, and
    # then no deeper file is read); hostile text in configs comes from the mutations instead.
    config = template.format(name=_config_text(name), member=_config_text(member))
    if data.draw(st.booleans()):
        config = mutate_text(data, config)
    (folder / "config.pbtxt").write_bytes(config.encode("utf-8", "surrogateescape"))
    reads = [f"{name}/config.pbtxt"]
    if kind == "python":
        source = data.draw(st.sampled_from(["ok", "deep", "binary", "no_class"]))
        text = {"ok": MODEL_PY, "deep": MODEL_PY + "X = " + "-" * 100_000 + "1\n", "binary": "\x00\xff\x1b",
                "no_class": "x = 1\n"}[source]
        (version / "model.py").write_bytes(text.encode("utf-8", "surrogateescape"))
        (version / "labels.txt").write_text("a\nb\x1b[2J\n")
        (folder / "warmup").mkdir(exist_ok=True)
        (folder / "warmup" / "w.bin").write_bytes(b"\0" * 16)
        reads += [f"{name}/1/model.py", f"{name}/1/labels.txt", f"{name}/labels.txt", f"{name}/warmup/w.bin"]
    elif kind == "onnx":
        (version / "model.onnx").write_bytes(onnx_bytes(data))
        reads += [f"{name}/1/model.onnx"]
    elif kind == "plan":
        (version / "model.plan").write_bytes(b"ftrt\0\0\0\0" + b"\0" * 16 + bytes([10, 3, 0, 26]) + b"engine")
        sidecar = data.draw(st.sampled_from(["ok", "deep", "garbage", "wrong"]))
        text = {"ok": json.dumps(PLAN_JSON), "deep": "[" * 100_000 + "]" * 100_000, "garbage": "\x1b[2J{",
                "wrong": json.dumps({"format": 1, "plans": {"model.plan": {"inputs": 7}}})}[sidecar]
        (version / "plan.json").write_text(text)
        reads += [f"{name}/1/model.plan", f"{name}/1/plan.json"]
    return reads


def model_name(data: st.DataObject) -> str:
    parts = data.draw(st.lists(st.sampled_from(HOSTILE_CHARS), min_size=1, max_size=5))
    name = "".join(parts).replace("/", "")
    if data.draw(st.integers(0, 5)) == 0:
        name += os.fsdecode(b"\xff\xfe")  # not UTF-8
    return name if name not in ("", ".", "..") and len(os.fsencode(name)) < 200 else "m"


def swap_in(path: Path, kind: str, repo: Path, canary: Path) -> None:
    """Replace ``path`` with a special file or a link of ``kind``."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "socket":
        # AF_UNIX paths are limited to ~107 bytes, which a deep temp folder and a hostile name pass: bind in a
        # short folder beside the repository, then move the socket file into place (a rename keeps it a socket).
        # The deepest writable ancestor with a short path: same filesystem, so the rename stays a rename.
        near = next((a for a in repo.parents if len(str(a)) < 80 and os.access(a, os.W_OK)), Path("/tmp"))
        short = Path(tempfile.mkdtemp(prefix="s", dir=near))
        try:
            with socket.socket(socket.AF_UNIX) as sock:
                sock.bind(str(short / "s"))
            os.rename(short / "s", path)
        finally:
            shutil.rmtree(short, ignore_errors=True)
    elif kind == "device":
        if os.geteuid() == 0:
            os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(1, 5))  # a /dev/zero of our own
        else:
            path.symlink_to("/dev/zero")
    elif kind == "folder":
        path.mkdir()
    elif kind == "link_out":
        path.symlink_to(canary)
    elif kind == "link_zero":
        path.symlink_to("/dev/zero")
    elif kind == "link_loop":
        path.symlink_to(path.name)
    elif kind == "link_dangling":
        path.symlink_to(path.parent / "no-such-file")
    else:
        inside = repo / "inside.bin"
        inside.write_bytes(b"inside")
        path.symlink_to(inside)


@st.composite
def repositories(draw: st.DrawFn) -> tuple[st.DataObject, list[str], list[Swap]]:
    data = draw(st.data())
    kinds = draw(st.lists(st.sampled_from(["python", "onnx", "plan", "ensemble"]), min_size=1, max_size=4))
    return data, kinds, []


def build_repository(data: st.DataObject, kinds: list[str], repo: Path, canary: Path) -> list[Swap]:
    repo.mkdir()
    names: list[str] = []
    reads: list[str] = []
    for kind in kinds:
        name = model_name(data)
        if name in names or os.fsencode(name).lower() in (os.fsencode(n).lower() for n in names):
            name = f"{name}{len(names)}"
        names.append(name)
        reads += write_model(data, repo, name, kind, names[0])
    manifest = {"format": 1, "models": {n: {"versions": {"1": {"files": {"model.py": "0" * 64}}}} for n in names}}
    text = data.draw(st.sampled_from([json.dumps(manifest), "[" * 100_000 + "]" * 100_000, "{\x1b", None]))
    if text is not None:
        (repo / "repo-builder.json").write_text(text)
        reads.append("repo-builder.json")
    swaps = [Swap(t, data.draw(st.sampled_from(KINDS))) for t in data.draw(st.lists(st.sampled_from(reads), max_size=3, unique=True))]
    if data.draw(st.booleans()):  # a whole model or version folder linking out
        swaps.append(Swap(names[-1] + data.draw(st.sampled_from(["", "/1"])), "link_out_folder"))
    for swap in swaps:
        target = repo / swap.target
        if swap.kind == "link_out_folder":
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)
                target.symlink_to(canary.parent)
            continue
        swap_in(target, swap.kind, repo, canary)
    return swaps


# --- running and judging one repository -------------------------------------------------------------


def _snapshot(folder: Path, skip: Path) -> dict[str, tuple[int, int, str]]:
    """(mode, size, sha256) of everything under ``folder`` except ``skip``, links and specials by type."""
    out: dict[str, tuple[int, int, str]] = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        if Path(dirpath) == skip or skip in Path(dirpath).parents:
            dirnames[:] = []
            continue
        for name in dirnames + filenames:
            path = Path(dirpath, name)
            st_ = os.lstat(path)
            digest = ""
            if stat.S_ISREG(st_.st_mode):
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
            elif stat.S_ISLNK(st_.st_mode):
                digest = os.readlink(path)
            out[os.fsencode(path).hex()] = (stat.S_IFMT(st_.st_mode), st_.st_size if digest else 0, digest)
    return out


# The child reports its own peak (VmHWM of the process after exec) as it exits: wait4's ru_maxrss also counts
# the parent's pages the forked child held before exec, so inside a big pytest process it measures pytest.
PEAK_WRAPPER = """
import atexit, runpy, sys
peak_file = sys.argv[1]
def _peak():
    with open('/proc/self/status') as status:
        kb = next(int(line.split()[1]) for line in status if line.startswith('VmHWM:'))
    with open(peak_file, 'w') as out:
        out.write(str(kb))
atexit.register(_peak)
sys.argv = ['repo-builder', *sys.argv[2:]]
runpy.run_module('repo_builder.cli.main', run_name='__main__')
"""


def _limits() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_BYTES, ADDRESS_SPACE_BYTES))


@dataclass(frozen=True)
class Run:
    code: int
    stdout: bytes
    stderr: bytes
    seconds: float
    max_rss: int
    trace: str


def run_validate(repo: Path, out: Path, scratch: Path) -> Run:
    home = out / "home"
    home.mkdir(parents=True)
    env = {
        **os.environ, "PYTHONPATH": str(ROOT), "PYTHONDONTWRITEBYTECODE": "1", "HOME": str(home),
        "TMPDIR": str(home), "XDG_CACHE_HOME": str(home), "GITHUB_WORKSPACE": str(scratch), "LC_ALL": "C.UTF-8",
    }
    peak_file = out / "peak_kb"
    argv = [sys.executable, "-c", PEAK_WRAPPER, str(peak_file), "validate", os.fsdecode(bytes(repo)), "--format", "text",
            "--format", f"json={out / 'r.json'}", "--format", f"sarif={out / 'r.sarif'}",
            "--format", f"junit={out / 'r.xml'}", "--format", f"github={out / 'r.github'}"]
    trace_file = out / "strace.txt"
    if STRACE:
        argv = [STRACE, "-f", "-qq", "-y", "-e", "trace=open,openat,openat2,creat,mknod,mknodat,mkdir,mkdirat,rename,renameat,renameat2,unlink,unlinkat",
                "-e", "status=successful", "-o", str(trace_file), *argv]
    start = time.monotonic()
    with open(out / "stdout", "wb") as so, open(out / "stderr", "wb") as se:
        proc = subprocess.Popen(argv, stdout=so, stderr=se, env=env, cwd=out, preexec_fn=_limits)
    # wait4: this child's own peak memory (RUSAGE_CHILDREN would count every earlier test's children too).
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() - start > TIME_LIMIT_S:
            proc.kill()
            os.wait4(proc.pid, 0)
            proc.returncode = -9
            raise AssertionError(f"validate did not finish in {TIME_LIMIT_S:.0f} s")
        time.sleep(0.05)
    proc.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.monotonic() - start
    stdout, stderr = (out / "stdout").read_bytes(), (out / "stderr").read_bytes()
    trace = trace_file.read_text(errors="replace") if trace_file.exists() else ""
    peak = int(peak_file.read_text()) if peak_file.exists() else usage.ru_maxrss
    return Run(proc.returncode, stdout, stderr, seconds, peak * 1024, trace)


def _under(path: str, folder: Path) -> bool:
    root = str(folder.resolve())
    return path == root or path.startswith(root + os.sep)


_TRACED_PATH = re.compile(r"= \d+<(?P<path>[^>]*)>$")


def _opened_outside(trace: str, repo: Path, out: Path, scratch: Path) -> list[str]:
    """Files the child opened that resolve into the scratch root but outside the repository and report folder."""
    bad = []
    for line in trace.splitlines():
        match = _TRACED_PATH.search(line)
        if match is None:
            continue
        path = match.group("path")
        if _under(path, scratch) and not (_under(path, repo) or _under(path, out)):
            bad.append(line)
        if path in ("/dev/zero", "/dev/random") or "/dev/zero" in line.split("<", 1)[0]:
            bad.append(line)
    return bad


_WRITE_CALL = re.compile(r"(O_WRONLY|O_RDWR|O_CREAT|^\d+ (creat|mknod|mkdir|rename|unlink))")


def _written_outside(trace: str, out: Path) -> list[str]:
    """Write-like calls that touch a path outside the report folder (and /dev/null, the terminal)."""
    bad = []
    for line in trace.splitlines():
        if not _WRITE_CALL.search(line):
            continue
        paths = re.findall(r'"([^"]*)"', line) + re.findall(r"<([^>]*)>", line)
        targets = [p for p in paths if p.startswith("/") and not p.startswith(("/dev/null", "/dev/pts", "pipe:"))]
        if any(not _under(p, out) for p in targets):
            bad.append(line)
    return bad


def check_run(run: Run, repo: Path, out: Path, scratch: Path) -> None:
    text = run.stdout.decode("utf-8", "replace")
    assert run.code in (0, 1, 2, 3), f"exit {run.code}\n{run.stderr.decode(errors='replace')[-2000:]}"
    assert b"Traceback" not in run.stderr and b"internal error" not in run.stderr, run.stderr[-2000:]
    assert run.max_rss < MAX_RSS_BYTES, f"peak memory {run.max_rss >> 20} MB"
    assert CANARY_TEXT not in text and CANARY_TEXT.encode() not in run.stderr
    if run.code in (0, 1):
        json.loads((out / "r.json").read_text(encoding="utf-8"))
        sarif = json.loads((out / "r.sarif").read_text(encoding="utf-8"))
        assert sarif["version"] == "2.1.0"
        ET.parse(out / "r.xml")
        for name in ("r.json", "r.sarif", "r.xml", "r.github"):
            assert CANARY_TEXT not in (out / name).read_text(encoding="utf-8")
        github = (out / "r.github").read_text(encoding="utf-8").splitlines()
        assert all(not line.startswith("::") or re.match(r"::(error|warning|notice) file=", line) for line in github)
    raw = re.sub(r"\x1b\[[0-9;]*m", "", text)  # colours never appear here (not a terminal), but be exact
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]", raw), repr(raw[:3000])
    assert not any(line.startswith("::") for line in raw.splitlines()), raw[:3000]
    if STRACE:
        assert not _opened_outside(run.trace, repo, out, scratch), _opened_outside(run.trace, repo, out, scratch)[:5]
        assert not _written_outside(run.trace, out), _written_outside(run.trace, out)[:5]


def _canary(scratch: Path) -> Path:
    folder = scratch / "outside"
    folder.mkdir()
    canary = folder / "secret.txt"
    canary.write_text(json.dumps({"format": CANARY_TEXT, "plans": {}}) + "\n")
    st_ = canary.stat()
    os.utime(canary, ns=(st_.st_mtime_ns - 10**12, st_.st_mtime_ns))  # relatime moves atime on the next read
    return canary


def _atime_works(scratch: Path) -> bool:
    probe = scratch / "probe"
    probe.write_text("x")
    st_ = probe.stat()
    os.utime(probe, ns=(st_.st_mtime_ns - 10**12, st_.st_mtime_ns))
    before = probe.stat().st_atime_ns
    probe.read_text()
    moved = probe.stat().st_atime_ns != before
    probe.unlink()
    return moved


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    phases=(Phase.explicit, Phase.generate),  # shrinking a subprocess run takes minutes; the note says what failed
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)
@given(case=repositories())
def test_validate_fuzz_holds_every_guarantee_when_repositories_are_hostile(
    case: tuple[st.DataObject, list[str], list[Swap]], tmp_path_factory: pytest.TempPathFactory
) -> None:
    data, kinds, _ = case
    scratch = tmp_path_factory.mktemp("fuzz")
    canary = _canary(scratch)
    repo = scratch / "repo"
    out = scratch / "out"
    out.mkdir()
    swaps = build_repository(data, kinds, repo, canary)
    atime_works = _atime_works(scratch)
    before = _snapshot(scratch, out)  # reads the canary: its access time is reset below
    st_ = canary.stat()
    os.utime(canary, ns=(st_.st_mtime_ns - 10**12, st_.st_mtime_ns))
    canary_atime = canary.stat().st_atime_ns
    run = run_validate(repo, out, scratch)
    note = f"kinds={kinds} swaps={swaps} seconds={run.seconds:.1f}"
    try:
        if atime_works:
            assert canary.stat().st_atime_ns == canary_atime, "the canary outside the repository was read"
        check_run(run, repo, out, scratch)
        assert _snapshot(scratch, out) == before, "something outside the report folder changed"
    except AssertionError as exc:
        raise AssertionError(f"{note}: {exc}") from None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def test_fuzz_oracle_sees_a_read_outside_when_a_process_reads_the_canary(tmp_path: Path) -> None:
    """The strace/atime oracle can fail: a child that reads the canary is caught."""
    canary = _canary(tmp_path)
    atime = canary.stat().st_atime_ns
    out = tmp_path / "out"
    out.mkdir()
    trace = out / "t.txt"
    argv = [sys.executable, "-c", f"open({str(canary)!r}).read()"]
    if STRACE:
        argv = [STRACE, "-f", "-qq", "-y", "-e", "trace=openat", "-e", "status=successful", "-o", str(trace), *argv]
    subprocess.run(argv, check=True, timeout=60)
    if _atime_works(tmp_path):
        assert canary.stat().st_atime_ns != atime
    if STRACE:
        assert _opened_outside(trace.read_text(), tmp_path / "repo", out, tmp_path)
    if not STRACE and not _atime_works(tmp_path):
        pytest.skip(reason="no strace and no access times on this filesystem: the oracle cannot see reads")
