"""The Python of NVIDIA's stock py3 image, reproduced on this machine for the embedded tritonserver.

The image runs Python steps on its system Python (3.10 or 3.12) holding only what ``triton_images.py``
lists for the release (``numpy<2``, ``wheel``, ``setuptools``, ``virtualenv``, ...). The builder's own venv holds far more (PIL,
tokenizers, onnxruntime, ...), so a step proven there can still die in the image with
``No module named 'PIL'``. Here we build a venv of the image's Python with only the image's packages; the
wheel's server then runs the stub for that Python against it (``locate.py``: its stub, its LIBDIR on
``LD_LIBRARY_PATH``, the venv's ``bin`` first on ``PATH``).

Venvs and the ONNX Runtime stand-in's packages are cached under ``$REPO_BUILDER_CACHE`` (default
``~/.cache/repo-builder``): each is built in a hidden sibling folder under a lock and renamed into place,
so a concurrent process either waits for it or sees it whole. What this machine cannot provide (no such
Python, no network for pip) comes back as a one-line reason, never an exception: the caller reports the
model "not proven", never passed.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from repo_builder.triton_images import ImageRow

MARKER = "repo-builder-image.json"  # written last inside a finished entry: what it holds
LOCK_WAIT = 900.0  # seconds a second process waits for the first one's build (pip over a slow network)
PIP_TIMEOUT = 900.0
_PIP_ONLY = frozenset({"pip"})  # the image's Python has one (python3-pip); ours gets none, but may hold it

# Asked of a candidate interpreter in one subprocess: its X.Y, full version and where libpython lies.
_PROBE = (
    "import json, sys, sysconfig; print(json.dumps([f'{sys.version_info[0]}.{sys.version_info[1]}', "
    "sys.version.split()[0], sysconfig.get_config_var('LIBDIR') or '']))"
)

# Run by the venv's python after pip: numpy's version and every installed distribution with what it requires.
_INVENTORY = """
import json, importlib.metadata as md
import numpy
dists = {d.metadata["Name"]: [d.version, d.requires or []] for d in md.distributions()}
print(json.dumps({"numpy": numpy.__version__, "dists": dists}))
"""


@dataclass(frozen=True)
class ImagePython:
    """A venv of the image's Python holding only the image's packages, ready for the wheel's server."""

    version: str  # "3.12": picks the stub python_backend_stubs/<version>/
    interpreter: Path  # the base CPython the venv was made from
    prefix: Path  # the venv: its bin/python3 goes first on the server's PATH
    libdir: Path  # the interpreter's LIBDIR, holding libpython<version>.so

    @property
    def python(self) -> Path:
        return self.prefix / "bin" / "python3"


@dataclass(frozen=True)
class _Probe:
    interpreter: Path
    version: str  # "3.12"
    full_version: str  # "3.12.1"
    libdir: Path


def cache_root() -> Path:
    """``$REPO_BUILDER_CACHE``, else ``$XDG_CACHE_HOME/repo-builder``, else ``~/.cache/repo-builder``."""
    explicit = os.environ.get("REPO_BUILDER_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "repo-builder"


def _clean_env() -> dict[str, str]:
    # Another environment's variables must not leak into the image's Python (or its pip's target).
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONUSERBASE")}
    env["PYTHONNOUSERSITE"] = "1"
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env["PIP_NO_INPUT"] = "1"
    return env


def _pyenv_root() -> Path | None:
    if os.environ.get("PYENV_ROOT"):
        return Path(os.environ["PYENV_ROOT"]).expanduser()
    pyenv = shutil.which("pyenv")
    if pyenv:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            out = subprocess.run([pyenv, "root"], capture_output=True, text=True, timeout=10, check=True).stdout.strip()
            if out:
                return Path(out)
    home = Path.home() / ".pyenv"
    return home if home.is_dir() else None


def _candidates(version: str) -> Iterator[Path]:
    """pyenv's X.Y.Z builds, newest patch first, then ``pythonX.Y`` on PATH."""
    root = _pyenv_root()
    if root is not None and (root / "versions").is_dir():
        pattern = re.compile(rf"^{re.escape(version)}\.(\d+)$")  # not 3.12-dev, 3.12.1t (free-threaded)
        found = [(int(m.group(1)), p) for p in (root / "versions").iterdir() if (m := pattern.match(p.name))]
        for _, folder in sorted(found, reverse=True):
            yield folder / "bin" / "python"
    on_path = shutil.which(f"python{version}")
    if on_path:
        yield Path(on_path)


def _probe(interpreter: Path) -> _Probe | None:
    if not os.access(interpreter, os.X_OK):
        return None
    try:
        out = subprocess.run(
            [str(interpreter), "-I", "-c", _PROBE], capture_output=True, text=True, timeout=30, check=True, env=_clean_env()
        ).stdout
        short, full, libdir = json.loads(out)
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    return _Probe(interpreter, str(short), str(full), Path(libdir))


def _search(version: str) -> _Probe | str:
    """The first candidate that is CPython ``version`` with a shared libpython, or why there is none."""
    static: list[Path] = []
    for candidate in _candidates(version):
        probe = _probe(candidate)
        if probe is None or probe.version != version:
            continue
        if (probe.libdir / f"libpython{version}.so").exists():
            return probe
        static.append(candidate)
    if static:
        return (
            f"Python {version} at {static[0]} has no shared libpython{version}.so, which the Python backend's "
            f"stub needs (rebuild it shared: PYTHON_CONFIGURE_OPTS=--enable-shared pyenv install --force {version})"
        )
    return f"Python {version} is not installed on this machine (pyenv install {version}, or put python{version} on PATH)"


def find_interpreter(version: str) -> Path | None:
    """A CPython ``version`` ("3.12") with a shared libpython on this machine: pyenv's, then ``pythonX.Y`` on PATH."""
    found = _search(version)
    return found.interpreter if isinstance(found, _Probe) else None


@contextlib.contextmanager
def _cache_lock(path: Path) -> Iterator[None]:
    """Wait (bounded) for ``flock`` on ``path``; the kernel drops it if the holder dies, even by SIGKILL.

    The file stays (unlike ``repository/lock.py``'s): waiters queue on one inode, and an empty file in a
    cache costs nothing.
    """
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        deadline = time.monotonic() + LOCK_WAIT
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"another process holds {path} for more than {LOCK_WAIT:g} s") from None
                time.sleep(0.2)
        yield
    finally:
        os.close(fd)


def _digest(*parts: object) -> str:
    import hashlib  # stdlib, but only building a cache key needs it

    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


def _one_line(output: str) -> str:
    """pip's reason in one line: its last ERROR line, else its last non-empty line."""
    lines = [line.strip() for line in output.splitlines() if line.strip() and "is ignored: it is neither" not in line]
    errors = [line for line in lines if line.startswith("ERROR")]
    # "Could not find a version ... (from versions: ...)" says more than the "No matching distribution" after it:
    # whether the index answered at all (versions: none) or only no release fits this Python.
    found = [line for line in errors if "could not find a version" in line.lower()]
    text = (found or errors or lines or ["no output"])[-1]
    return text if len(text) <= 300 else text[:297] + "..."


def no_release_fits(reason: str) -> bool:
    """pip found the package's releases but none with a wheel for the requested Python and platform (not an
    index it could not read: then it lists no versions at all, and nothing older may be tried instead)."""
    lower = reason.lower()
    return "could not find a version" in lower and "(from versions: none)" not in lower


def run_tool(args: Sequence[str], what: str) -> str | None:
    """Run ``args`` with output captured; None when it succeeds, else a one-line reason."""
    try:
        done = subprocess.run(list(args), capture_output=True, text=True, timeout=PIP_TIMEOUT, env=_clean_env())
    except subprocess.TimeoutExpired:
        return f"{what} took more than {PIP_TIMEOUT:g} s"
    except OSError as exc:
        return f"{what} could not run ({exc.strerror})"
    if done.returncode != 0:
        return f"{what} failed: {_one_line(done.stdout + done.stderr)}"
    return None


def cached_folder(target: Path, build: Callable[[Path], str | None]) -> Path | str:
    """``target`` once whole: built by ``build(tmp)`` in a hidden sibling under a lock, then renamed in.

    ``build`` returns None on success or a one-line reason; a finished entry holds ``MARKER``.
    """
    if (target / MARKER).is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        with _cache_lock(target.parent / f".{target.name}.lock"):
            if (target / MARKER).is_file():
                return target  # another process finished it while we waited
            # Under the lock nobody else builds this entry: what a killed build left (hidden siblings) goes.
            for stale in target.parent.glob(f".{target.name}.*"):
                if stale.is_dir():
                    shutil.rmtree(stale, ignore_errors=True)
            shutil.rmtree(target, ignore_errors=True)  # a husk without its marker
            tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
            try:
                reason = build(tmp)
                if reason is not None:
                    return reason
                tmp.chmod(0o755)  # mkdtemp's 0700 would hide the entry from a server run as another user
                os.rename(tmp, target)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
    except (OSError, TimeoutError) as exc:
        return f"cannot prepare {target}: {exc}"
    return target


def _rewrite_prefix(tmp: Path, final: Path) -> None:
    """Scripts and activate files name the folder they were made in: point them at the final one."""
    old, new = str(tmp).encode(), str(final).encode()
    for path in [*(tmp / "bin").iterdir(), tmp / "pyvenv.cfg"]:
        if path.is_symlink() or not path.is_file():
            continue
        data = path.read_bytes()
        if old in data:
            path.write_bytes(data.replace(old, new))


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _allowed(packages: Sequence[tuple[str, str]], dists: dict[str, tuple[str, list[str]]]) -> set[str]:
    """The image's packages and everything they require (extras aside), transitively, plus pip."""
    requires = {_canonical(name): needs for name, (_, needs) in dists.items()}
    allowed = set(_PIP_ONLY)
    todo = [_canonical(name) for name, _ in packages]
    while todo:
        name = todo.pop()
        if name in allowed:
            continue
        allowed.add(name)
        for requirement in requires.get(name, []):
            if "extra ==" in requirement.replace('"', "").replace("'", ""):
                continue
            match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
            if match:
                todo.append(_canonical(match.group(1)))
    return allowed


def _check_inventory(python: Path, packages: Sequence[tuple[str, str]]) -> dict[str, str] | str:
    """The venv's distributions (name -> version) when numpy fits its specifier and nothing else crept in."""
    # Installed with setuptools, wheel and most tools (step_packages.py needs it too); only checking needs it.
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    try:
        # -I: the working folder (a checkout's *.egg-info) must not count as installed.
        out = subprocess.run([str(python), "-I", "-c", _INVENTORY], capture_output=True, text=True, timeout=60, env=_clean_env())
    except (OSError, subprocess.SubprocessError) as exc:
        return f"the new venv's python does not run: {exc}"
    if out.returncode != 0:
        return f"the new venv's python cannot import numpy: {_one_line(out.stderr)}"
    inventory = json.loads(out.stdout)
    dists = {str(name): (str(version), [str(r) for r in needs]) for name, (version, needs) in inventory["dists"].items()}
    wanted = dict(packages).get("numpy", "")
    try:
        fits = str(inventory["numpy"]) in SpecifierSet(wanted)
    except InvalidSpecifier:
        return f"the image's numpy specifier {wanted!r} is not a version specifier"
    if not fits:
        return f"pip installed numpy {inventory['numpy']}, but the image holds numpy{wanted}"
    extra = sorted(name for name in dists if _canonical(name) not in _allowed(packages, dists))
    if extra:
        return f"the venv holds packages the image does not ({', '.join(extra)}): check PIP_* settings and pip.conf"
    return {name: version for name, (version, _) in sorted(dists.items())}


def prepare_image_python(image: ImageRow, *, cache_dir: Path | None = None) -> ImagePython | str:
    """A venv of ``image.python`` holding only ``image.packages``, created once and cached under
    ``cache_dir`` (default ``cache_root()``) ``/image-python/``; else why not.

    The reason is one line ("Python 3.12 is not installed on this machine (...)", pip's error): the caller
    reports the models it would have proven as not proven.
    """
    probe = _search(image.python)
    if isinstance(probe, str):
        return probe
    specs = [f"{name}{spec}" for name, spec in image.packages]
    key = _digest(specs, probe.full_version, str(probe.interpreter.resolve()))
    target = (cache_dir or cache_root()) / "image-python" / f"{image.python}-{key}"
    # An entry whose base interpreter went away (pyenv uninstall) is rebuilt, not handed to the server.
    if (target / MARKER).is_file() and not (target / "bin" / "python3").exists():
        shutil.rmtree(target, ignore_errors=True)

    def build(tmp: Path) -> str | None:
        # The builder's pip installs into the venv (--python): no ensurepip (3 s), and --no-compile (4 s of
        # 7): the stub compiles only what a step imports, once, into this cache.
        failed = run_tool([str(probe.interpreter), "-m", "venv", "--without-pip", str(tmp)], f"python{image.python} -m venv")
        failed = failed or run_tool(
            [sys.executable, "-m", "pip", "--python", str(tmp / "bin" / "python3"), "install", "--quiet", "--no-input",
             "--no-compile", *specs],
            f"pip install {' '.join(specs)} into the image venv",
        )
        if failed:
            return failed
        installed = _check_inventory(tmp / "bin" / "python3", image.packages)
        if isinstance(installed, str):
            return installed
        _rewrite_prefix(tmp, target)
        marker = {"python": probe.full_version, "interpreter": str(probe.interpreter), "requested": specs, "installed": installed}
        (tmp / MARKER).write_text(json.dumps(marker, indent=2) + "\n", encoding="utf-8")
        return None

    made = cached_folder(target, build)
    if isinstance(made, str):
        return f"cannot prepare Python {image.python} as the {image.release} image has it: {made}"
    return ImagePython(version=image.python, interpreter=probe.interpreter, prefix=made, libdir=probe.libdir)


def host_glibc() -> str | None:
    """This machine's glibc ("2.36"); None on another C library (musl)."""
    with contextlib.suppress(ValueError, OSError):
        text = os.confstr("CS_GNU_LIBC_VERSION") or ""
        if text.startswith("glibc "):
            return text.split()[1]
    return None


def manylinux_platforms(glibc: str, machine: str = "x86_64") -> tuple[str, ...]:
    """pip ``--platform`` tags a wheel may carry to run on ``glibc``: manylinux_2_<glibc>_M down to 2_17."""
    major, minor = (int(p) for p in glibc.split(".")[:2])
    if major != 2 or minor < 17:
        return ()
    return (*(f"manylinux_2_{m}_{machine}" for m in range(minor, 16, -1)), f"manylinux2014_{machine}")


def pip_target_arguments(version: str, platforms: Sequence[str]) -> list[str]:
    """``pip install --target`` options that fetch wheels for CPython ``version`` on ``platforms``, whatever runs pip."""
    abi = "cp" + version.replace(".", "")
    args = ["--no-deps", "--no-compile", "--only-binary=:all:", "--python-version", version,
            "--implementation", "cp", "--abi", abi]
    for platform in platforms:
        args += ["--platform", platform]
    return args


def standin_packages(version: str, *, platforms: Sequence[str] | None = None, cache_dir: Path | None = None) -> Path | str:
    """A folder holding onnxruntime (the builder's own version) for CPython ``version``, for the ONNX Runtime
    stand-in alone: it goes on the stand-in's ``sys.path``, never into the image venv, where a repository step
    could import it although the image has none. ``platforms`` default to this machine's (the stand-in runs
    here). onnxruntime needs only numpy to import; ``--no-deps`` keeps it at that."""
    import platform as host  # stdlib; only naming the wheel's platform needs it
    from importlib import metadata

    try:
        ort = metadata.version("onnxruntime")
    except metadata.PackageNotFoundError:
        return "onnxruntime is not installed here (pip install 'repo-builder[serve]'): the ONNX Runtime stand-in needs it"
    if platforms is None:
        glibc = host_glibc()
        platforms = manylinux_platforms(glibc, host.machine()) if glibc else ()
        if not platforms:
            return f"no manylinux onnxruntime wheel runs on this machine ({host.machine()}, C library {host.libc_ver()})"
    key = _digest(version, ort, list(platforms))
    target = (cache_dir or cache_root()) / "standin-packages" / f"{version}-onnxruntime-{ort}-{key}"

    def build(tmp: Path) -> str | None:
        arguments = [sys.executable, "-m", "pip", "install", "--quiet", "--no-input", "--target", str(tmp),
                     *pip_target_arguments(version, platforms)]
        failed = run_tool([*arguments, f"onnxruntime=={ort}"], f"pip install onnxruntime=={ort} for Python {version}")
        if failed and no_release_fits(failed):  # a newer onnxruntime may have dropped that Python
            failed = run_tool([*arguments, f"onnxruntime<={ort}"], f"pip install onnxruntime<={ort} for Python {version}")
        if failed:
            return failed
        if not (tmp / "onnxruntime" / "__init__.py").is_file():
            return f"pip installed no onnxruntime package into {tmp}"
        (tmp / MARKER).write_text(json.dumps({"onnxruntime": ort, "python": version, "platforms": list(platforms)}) + "\n",
                                  encoding="utf-8")
        return None

    made = cached_folder(target, build)
    return f"cannot prepare the ONNX Runtime stand-in for Python {version}: {made}" if isinstance(made, str) else made
