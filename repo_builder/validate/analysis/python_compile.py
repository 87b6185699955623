"""Whether CPython can compile a ``model.py`` that validate's own parser gave up on (nested thousands
deep): ``compile()`` in a child process, never ``exec``, under memory and time limits.

A file CPython cannot compile (RecursionError or MemoryError while compiling) is one Triton's stub cannot
import either: an error, with the compiler's own message. A file it compiles was only too deep for the
analysis here: its checks stay skipped, a warning. Only such files pay for the child (tens of ms).
"""

from __future__ import annotations

import contextlib
import json
import sys
from functools import lru_cache

from repo_builder.validate.records import Severity

COMPILE_MEMORY_BYTES = 2 << 30  # the child's address space: CPython plus the largest model.py's syntax tree
COMPILE_SECONDS = 20  # wall clock (and CPU) for one compile; a busy CI machine compiles 16 MiB in far less
TOO_DEEP = (
    "{filename} is nested too deeply for validate to parse; its checks (class TritonPythonModel, "
    "method execute) were skipped, not passed, although CPython {version} compiles it"
)
UNDECIDED = (
    "{filename} is nested too deeply for validate to parse; its checks (class TritonPythonModel, "
    "method execute) were skipped, not passed: compiling it {why}"
)
NOT_COMPILED = "{filename} is nested too deeply to compile: CPython {version} fails with {error}; Triton's stub cannot import it"

PythonProblem = tuple[str, int | None, int | None, Severity]  # message, line, column, severity (python_source's)

# Runs in the child: limits first, then the source from stdin, compiled and thrown away (never executed).
_CHILD = """\
import json, resource, sys
def lower(kind, value):  # never above a limit the caller already set (a limit can only go down)
    hard = resource.getrlimit(kind)[1]
    value = value if hard == resource.RLIM_INFINITY else min(value, hard)
    resource.setrlimit(kind, (value, value if hard == resource.RLIM_INFINITY else hard))
    return value
memory = lower(resource.RLIMIT_AS, int(sys.argv[1]))
lower(resource.RLIMIT_CPU, int(sys.argv[2]))
source = sys.stdin.buffer.read()
try:
    compile(source, sys.argv[3], "exec", dont_inherit=True)
    out = {"ok": True}
except (SyntaxError, RecursionError, MemoryError, ValueError) as exc:
    message = exc.msg if isinstance(exc, SyntaxError) else str(exc)
    out = {"error": type(exc).__name__, "message": message, "line": getattr(exc, "lineno", None)}
def peak():
    # The address space's peak (what RLIMIT_AS bounds) of this process image: /proc's VmPeak starts anew at
    # exec, unlike ru_maxrss, which keeps the forking parent's (a large test runner's) from before the exec.
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmPeak:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # bytes (Linux reports KiB)
out["peak"] = peak()
out["limit"] = memory
sys.stdout.write(json.dumps(out))
"""


def _version() -> str:
    return f"{sys.version_info.major}.{sys.version_info.minor}"


def _run_child(source: bytes, filename: str) -> dict[str, object]:
    """The child's answer: ``{"ok": True}``, ``{"error": ..., "message": ..., "line": ...}``, or
    ``{"undecided": why}`` when the limits stopped it first."""
    import signal  # stdlib, imported on use: only a model.py too deep to parse pays for the child
    import subprocess

    argv = [sys.executable, "-I", "-S", "-c", _CHILD, str(COMPILE_MEMORY_BYTES), str(COMPILE_SECONDS), filename]
    try:
        done = subprocess.run(argv, input=source, capture_output=True, timeout=COMPILE_SECONDS, env={}, cwd="/", check=False)
    except subprocess.TimeoutExpired:
        return {"undecided": f"took over {COMPILE_SECONDS} s"}
    except OSError as exc:
        return {"undecided": f"could not start Python ({exc.strerror or exc})"}
    with contextlib.suppress(ValueError):
        answer = json.loads(done.stdout)
        if isinstance(answer, dict):
            return answer
    if -done.returncode in (signal.SIGXCPU, signal.SIGKILL):  # the CPU limit
        return {"undecided": f"took over {COMPILE_SECONDS} s of CPU"}
    if done.returncode < 0:  # the compiler itself crashed (a segfault): the stub's would too
        return {"error": "a crash", "message": f"signal {signal.Signals(-done.returncode).name}"}
    return {"undecided": f"ended with exit code {done.returncode}"}


@lru_cache(maxsize=64)
def compile_problem(source: bytes, filename: str) -> PythonProblem:
    """The problem of a source validate's parser could not read for its depth: an error when CPython cannot
    compile it either, else a warning that its checks were skipped."""
    answer = _run_child(source, filename)
    if "undecided" in answer:
        return (UNDECIDED.format(filename=filename, why=answer["undecided"]), None, None, Severity.WARNING)
    peak, limit = answer.get("peak"), answer.get("limit")
    if answer.get("error") == "MemoryError" and isinstance(peak, int) and isinstance(limit, int) and peak > limit // 2:
        # The limit, not CPython's depth guard (which raises long before memory runs out), stopped it.
        return (UNDECIDED.format(filename=filename, why=f"needs more than {limit >> 20} MiB"), None, None, Severity.WARNING)
    if answer.get("ok"):
        return (TOO_DEEP.format(filename=filename, version=_version()), None, None, Severity.WARNING)
    message = str(answer.get("message") or "").strip()
    error = f"{answer.get('error')}" + (f": {message}" if message else "")
    line = answer.get("line")
    return (
        NOT_COMPILED.format(filename=filename, version=_version(), error=error),
        line if isinstance(line, int) else None,
        None,
        Severity.ERROR,
    )
