"""Bad input to every command, generated: random argv from each click command's real option set, pointing
at hostile files (FIFOs, symlinks out of the sandbox, /dev/zero, huge, binary and non-UTF-8 files).

Whatever the input, a command must answer with exit 0-3 and no traceback, change nothing outside its
sandbox, and finish in bounded time and memory. Each run is a subprocess (a hang or a memory blow-up
cannot take the test session down) with no network: proxies and the S3 endpoint point at a closed local
port. REPO_BUILDER_FUZZ_EXAMPLES raises the example count (default: a CI-fast handful).

Heavy commands only ever get inputs that must be refused (their output folder and model files are always
hostile), so none of them exports, compiles or serves for real; ``--live`` is never generated.
"""

from __future__ import annotations

import hashlib
import os
import resource
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import click
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from repo_builder.cli.main import cli  # noqa: E402

EXAMPLES = int(os.environ.get("REPO_BUILDER_FUZZ_EXAMPLES", "16"))
TIMEOUT_S = 120.0  # a command that needs longer on hostile input hangs
MAX_RSS_BYTES = 3 << 30  # torch alone takes about 1 GiB; a read of /dev/zero takes all there is
ADDRESS_SPACE_BYTES = 16 << 30  # the child dies of MemoryError long before the machine runs out
_LIMITED_MAIN = (
    "import resource, runpy, sys; n = int(sys.argv.pop(1)); "
    "resource.setrlimit(resource.RLIMIT_AS, (n, n)); sys.argv[0] = 'repo-builder'; "
    "runpy.run_module('repo_builder', run_name='__main__', alter_sys=True)"
)
SECRET = "ghp_SECRET_TOKEN_FUZZ"  # the content of the file symlinks lead to: never printed
CLOSED_PORT = "http://127.0.0.1:9"  # discard port: nothing listens, every request fails at once
NEVER_GENERATED = {"--live", "--help", "-h", "--version"}  # --live runs a server: not bad input
LIVE_ONLY = {"--tritonserver", "--load-timeout", "--allow-unproven"}  # refused without --live: left out

# Files in the sandbox every generated path points at. Output folders of heavy commands only get the
# ones nothing can be written into, so no command does real work.
HOSTILE_UNWRITABLE = ("fifo", "secret_link", "zero_link", "loop_link", "huge", "binary", "latin1", "under_file")
HOSTILE_ANY = (*HOSTILE_UNWRITABLE, "empty", "folder", "missing", "repo", "odd_name", "folder_link_out")
HEAVY = ("export", "build", "compile", "serve", "publish")


@dataclass(frozen=True)
class Param:
    flags: tuple[str, ...]  # ("--out",); empty for an argument
    kind: str  # flag | choice | int | float | path | text
    choices: tuple[str, ...] = ()
    multiple: bool = False
    required: bool = False


@dataclass(frozen=True)
class Command:
    path: tuple[str, ...]  # ("export", "resnet50")
    params: tuple[Param, ...]

    @property
    def heavy(self) -> bool:
        return self.path[0] in HEAVY


def _kind(param: click.Parameter) -> str:
    t = param.type
    if isinstance(param, click.Option) and param.is_flag:
        return "flag"
    if isinstance(t, click.Choice):
        return "choice"
    if isinstance(t, click.types.IntParamType):
        return "int"
    if isinstance(t, click.types.FloatParamType):
        return "float"
    if isinstance(t, click.Path | click.File):
        return "path"
    return "text"


def _param(p: click.Parameter) -> Param:
    flags = tuple(o for o in p.opts if o.startswith("-")) if isinstance(p, click.Option) else ()
    choices = tuple(str(c) for c in p.type.choices) if isinstance(p.type, click.Choice) else ()
    return Param(flags, _kind(p), choices, bool(getattr(p, "multiple", False)), bool(p.required))


def commands() -> list[Command]:
    """Every leaf command of ``repo-builder`` with its real options (read from click, not listed here)."""
    ctx = click.Context(cli)
    found: list[Command] = []

    def walk(cmd: click.Command, path: tuple[str, ...]) -> None:
        if isinstance(cmd, click.Group):
            for name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, name)
                if sub is not None:
                    walk(sub, (*path, name))
            return
        live = any("--live" in p.opts for p in cmd.params)
        skip = NEVER_GENERATED | (LIVE_ONLY if live else set())
        params = tuple(_param(p) for p in cmd.params if not set(p.opts) & skip)
        found.append(Command(path, params))

    walk(cli, ())
    return found


COMMANDS = commands()


def make_sandbox(root: Path, outside: Path) -> dict[str, Path]:
    """The hostile files, inside ``root``; symlinks lead to ``outside``, which must never change."""
    outside.mkdir()
    (outside / "secret.txt").write_text(f"{SECRET}\n")
    (outside / "dir").mkdir()
    (outside / "dir" / "keep.txt").write_text("keep me\n")
    root.mkdir()
    paths = {name: root / name for name in HOSTILE_ANY}
    os.mkfifo(paths["fifo"])
    paths["secret_link"].symlink_to(outside / "secret.txt")
    paths["folder_link_out"].symlink_to(outside / "dir")
    paths["zero_link"].symlink_to("/dev/zero")
    paths["loop_link"].symlink_to(paths["loop_link"])
    with open(paths["huge"], "wb") as fh:  # sparse: 3 GiB that take no disk
        fh.truncate(3 << 30)
    paths["binary"].write_bytes(bytes(range(256)) * 64)
    paths["latin1"].write_bytes("max_batch_size: 1 # caf\xe9 \xff\n".encode("latin-1"))
    paths["empty"].write_bytes(b"")
    paths["folder"].mkdir()
    (root / "file").write_text("")
    paths["under_file"] = root / "file" / "sub"
    paths["odd_name"] = root / os.fsdecode(b"odd\xffname")
    paths["odd_name"].mkdir()
    _hostile_repository(paths["repo"], outside)
    return paths


def _hostile_repository(repo: Path, outside: Path) -> None:
    """A model repository whose files are the hostile ones (issue 10, items 2 and 3)."""
    for name in ("fifo_model", "zero_model", "secret_config", "huge_config", "binary_config"):
        (repo / name / "1").mkdir(parents=True)
    (repo / "fifo_model" / "config.pbtxt").write_text('backend: "python"\n')
    os.mkfifo(repo / "fifo_model" / "1" / "model.py")
    (repo / "zero_model" / "config.pbtxt").write_text('backend: "python"\n')
    (repo / "zero_model" / "1" / "model.py").symlink_to("/dev/zero")
    (repo / "secret_config" / "config.pbtxt").symlink_to(outside / "secret.txt")
    with open(repo / "huge_config" / "config.pbtxt", "wb") as fh:
        fh.truncate(1 << 30)
    (repo / "binary_config" / "config.pbtxt").write_bytes(bytes(range(256)))
    (repo / "link_out").symlink_to(outside / "dir")


def digest(folder: Path) -> str:
    """Names, kinds, sizes, modes and contents of everything under ``folder``."""
    h = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        st_ = path.lstat()
        h.update(f"{path.relative_to(folder)}|{st_.st_mode}|{st_.st_size}|{st_.st_mtime_ns}".encode())
        if path.is_file() and not path.is_symlink():
            h.update(path.read_bytes())
    return h.hexdigest()


JUNK = st.one_of(
    st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), max_size=24),
    st.binary(max_size=12).map(lambda b: os.fsdecode(b.replace(b"\x00", b"") or b"x")),
    st.sampled_from(["-1", "0", "9" * 30, "nan", "-", "--", "s3://", "s3://bucket/../x", "../../..", "/", "."]),
)


def _path_value(command: Command, param: Param, paths: dict[str, Path]) -> st.SearchStrategy[str]:
    output = set(param.flags) & {"--out", "--output", "--from-export", "--weights", "--model", "--templates"}
    pool = HOSTILE_UNWRITABLE if command.heavy and (output or not param.flags) else HOSTILE_ANY
    if command.path[0] == "serve" and not param.flags:  # a folder would be served until killed
        pool = HOSTILE_UNWRITABLE
    elif not command.heavy and not param.flags:  # the repository argument: mostly the hostile repository
        pool = ("repo", *pool, "repo", "repo")
    return st.sampled_from(pool).map(lambda name: str(paths[name]))


def _format_value(paths: dict[str, Path]) -> st.SearchStrategy[str]:
    """``--format NAME`` or ``NAME=PATH`` (validate) with registered names and hostile files."""
    names = st.sampled_from(("text", "json", "github", "junit", "sarif"))
    to_file = st.tuples(names, st.sampled_from(HOSTILE_ANY)).map(lambda t: f"{t[0]}={paths[t[1]]}")
    return _mostly(st.one_of(names, to_file))


def _mostly(valid: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    """Mostly well-typed values (so a run gets past click's own checks into the command), sometimes junk."""
    return st.integers(0, 9).flatmap(lambda n: JUNK if n == 0 else valid)


def _value(command: Command, param: Param, paths: dict[str, Path]) -> st.SearchStrategy[str]:
    if param.kind == "path" or (command.heavy and param.flags and param.flags[0] in ("--weights", "--model")):
        return _path_value(command, param, paths)
    if param.kind == "text" and "--format" in param.flags:
        return _format_value(paths)
    if param.kind == "choice":
        return _mostly(st.sampled_from(param.choices))
    if param.kind == "int":
        return _mostly(st.one_of(st.integers(-2, 70), st.sampled_from([2**31, 2**63, 2**70, -(2**63) - 1])).map(str))
    if param.kind == "float":
        return _mostly(st.one_of(st.floats(-5, 600), st.sampled_from([0.0, -1.0, float("inf"), float("nan"), 1e308])).map(repr))
    return st.one_of(_path_value(command, param, paths), JUNK)


@st.composite
def argvs(draw: st.DrawFn, paths: dict[str, Path]) -> list[str]:
    # validate is what runs on untrusted pull requests: about a third of the runs
    validate = [c for c in COMMANDS if c.path == ("validate",)]
    command = draw(st.sampled_from(validate * (len(COMMANDS) // 2) + COMMANDS))
    argv = list(command.path)
    for param in command.params:
        forced = command.heavy and param.flags and param.flags[0] in ("--out", "--weights")
        if not (param.required or forced or draw(st.integers(0, 3)) == 0):
            continue
        for _ in range(draw(st.integers(1, 2)) if param.multiple else 1):
            if param.kind == "flag":
                argv.append(draw(st.sampled_from(param.flags)))
                continue
            value = draw(_value(command, param, paths))
            argv += [draw(st.sampled_from(param.flags)), value] if param.flags else [value]
    return argv


def run_command(argv: list[str], sandbox: Path) -> tuple[int | None, str, int]:
    """Exit code (None on timeout), stdout+stderr, and the child's peak RSS in bytes."""

    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(sandbox / "home"),
        "TMPDIR": str(sandbox / "tmp"),
        "TORCH_HOME": str(sandbox / "home" / "torch"),
        "HF_HOME": str(sandbox / "home" / "hf"),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "http_proxy": CLOSED_PORT,
        "https_proxy": CLOSED_PORT,
        "HTTP_PROXY": CLOSED_PORT,
        "HTTPS_PROXY": CLOSED_PORT,
        "AWS_ENDPOINT_URL": CLOSED_PORT,
        "AWS_ACCESS_KEY_ID": "fuzz",
        "AWS_SECRET_ACCESS_KEY": "fuzz",
        "NO_COLOR": "1",
    }
    if "PYTHONPATH" in os.environ:
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    proc = subprocess.Popen(
        # The address-space limit is set by the child itself: a preexec_fn would force a plain fork(),
        # which can deadlock in gRPC's fork handlers when this process has live gRPC threads.
        [sys.executable, "-c", _LIMITED_MAIN, str(ADDRESS_SPACE_BYTES), *argv],
        cwd=sandbox,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        out, _ = proc.communicate()
        return None, out.decode("utf-8", "replace"), 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return proc.returncode, out.decode("utf-8", "replace"), usage.ru_maxrss * 1024


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, dict[str, Path]]]:
    base = tmp_path_factory.mktemp("fuzz")
    root, outside = base / "sandbox", base / "outside"
    paths = make_sandbox(root, outside)
    for name in ("home", "tmp"):
        (root / name).mkdir()
    yield root, outside, paths


def test_fuzz_finds_every_command_when_reading_the_click_tree() -> None:
    names = {c.path[0] for c in COMMANDS}
    assert {"validate", "export", "build", "compile", "compile-pending", "serve"} <= names
    validate = next(c for c in COMMANDS if c.path == ("validate",))
    assert any("--format" in p.flags for p in validate.params) and not any("--live" in p.flags for p in validate.params)


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize="REPO_BUILDER_FUZZ_EXAMPLES" not in os.environ,  # CI: the same examples every run
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
    phases=[hypothesis.Phase.explicit, hypothesis.Phase.generate],  # shrinking a hang re-runs it for minutes
)
@given(data=st.data())
def test_every_command_exits_cleanly_when_given_bad_input(
    sandbox: tuple[Path, Path, dict[str, Path]], data: st.DataObject
) -> None:
    root, outside, paths = sandbox
    argv = data.draw(argvs(paths), label="argv")
    before = digest(outside)
    code, output, rss = run_command(argv, root)
    shown = f"repo-builder {' '.join(argv)!r}\n{output[-2000:]}"
    assert code is not None, f"still running after {TIMEOUT_S:.0f} s: {shown}"
    assert code in (0, 1, 2, 3), f"exit {code}: {shown}"
    assert "Traceback (most recent call last)" not in output, shown
    assert "internal error" not in output, shown
    assert SECRET not in output, f"printed a file from outside the repository: {shown}"
    assert digest(outside) == before, f"changed a file outside the sandbox: {shown}"
    assert rss < MAX_RSS_BYTES, f"peak memory {rss >> 20} MiB: {shown}"


# Bad input that once gave a traceback, a hang or a leak (issue 10); {name} is a sandbox path.
KNOWN_BAD: list[tuple[list[str], set[int]]] = [
    (["validate", "{repo}"], {1}),
    (["validate", "{repo}", "--format", "json", "--strict", "--no-gpu"], {1}),
    (["validate", "{secret_link}"], {2}),
    (["validate", "{repo}", "--output", "{under_file}/report.json"], {2}),
    (["validate", "{repo}", "--format", "sarif={under_file}/r.sarif", "--format", "text"], {2}),
    (["serve", "{folder}", "--host", "not a host"], {2}),
    (["serve", "{folder}", "--load-timeout", "-1"], {2}),
    (["serve", "{folder}", "--http-port", "8123", "--grpc-port", "8123"], {2}),
    (["build", "resnet50", "--from-export", "{folder}", "--name", "bad\n", "--out", "{missing}"], {2}),
    (["build", "resnet50", "--from-export", "{folder}", "--version", str(2**70), "--out", "{missing}"], {2}),
    (["compile-pending", "{repo}", "--no-validate"], {0, 1, 2, 3}),
]


@pytest.mark.parametrize(("argv", "codes"), KNOWN_BAD, ids=[" ".join(a) for a, _ in KNOWN_BAD])
def test_command_exits_cleanly_when_given_known_bad_input(
    sandbox: tuple[Path, Path, dict[str, Path]], argv: list[str], codes: set[int]
) -> None:
    root, outside, paths = sandbox
    argv = [a.format(**{k: str(v) for k, v in paths.items()}) for a in argv]
    before = digest(outside)
    code, output, _ = run_command(argv, root)
    shown = f"repo-builder {' '.join(argv)!r}\n{output[-2000:]}"
    assert code in codes, f"exit {code}: {shown}"
    assert "Traceback (most recent call last)" not in output and "internal error" not in output, shown
    assert SECRET not in output, shown
    assert digest(outside) == before, shown
