"""What the validator works on (a scanned ``Repository``) and what it produces (``Diagnostic``s).

The engine scans once; rules read these values and do no I/O of their own (except artifact rules that
open ONNX or plan files).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

from repo_builder.compat import StrEnum

if TYPE_CHECKING:
    from tritonclient.grpc import model_config_pb2

    from repo_builder.deploy_target import DeployTarget


T = TypeVar("T")


class kept(Generic[T]):  # lower case: a decorator, like the ``cached_property`` it stands for
    """``functools.cached_property`` without its lock: computed at the first access, then kept in the
    instance's ``__dict__`` (frozen dataclasses too). Python 3.10 and 3.11 take a lock at every first
    access; validate makes thousands of entries and asks each for a few such facts."""

    def __init__(self, compute: Callable[[Any], T]) -> None:
        self.compute, self.name, self.__doc__ = compute, compute.__name__, compute.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> kept[T]: ...

    @overload
    def __get__(self, obj: object, owner: type | None = None) -> T: ...

    def __get__(self, obj: object | None, owner: type | None = None) -> T | kept[T]:
        if obj is None:
            return self
        value: T = self.compute(obj)
        obj.__dict__[self.name] = value
        return value


class Severity(StrEnum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


@dataclass(frozen=True)
class Suppression:
    """Why a finding is set aside (``suppress.py``): ``kind`` is ``inline`` (a ``# repo-builder: ignore[...]``
    comment), ``ignore`` (``--ignore`` or the configuration file) or ``unselected`` (outside ``--select``)."""

    kind: str
    reason: str | None
    by: str  # the code, prefix or rule name that matched
    source: str | None = None  # the configuration file, when it came from one


@dataclass(frozen=True)
class Diagnostic:
    """One finding. ``path`` is relative to the repository root where possible."""

    code: str  # stable rule code, e.g. "RB101"
    rule: str  # kebab-case rule name
    severity: Severity
    message: str  # Triton's own message where it has one
    path: str
    model: str | None = None
    version: int | None = None
    hint: str | None = None
    line: int | None = None
    column: int | None = None
    suppression: Suppression | None = None  # set only on ``Report.suppressed`` entries


@dataclass(frozen=True)
class Finding:
    """What a rule yields; the engine adds code, rule name, model and default severity."""

    message: str
    path: Path | str | None = None  # default: the model's config.pbtxt (or its folder)
    hint: str | None = None
    version: int | None = None
    severity: Severity | None = None  # overrides the rule's default when set
    line: int | None = None
    column: int | None = None
    field: str | None = None  # the config field it is about (for its line), when not the rule's own


# The scan makes a few of these records per model: their ``__init__`` writes the instance's ``__dict__``
# directly, a third of what a frozen dataclass's generated one costs (an ``object.__setattr__`` per field).
# They stay frozen (assignment raises); tests/validate/test_records.py checks each sets every field.


@dataclass(frozen=True, init=False)
class FileEntry:
    """A file or folder inside a version folder (names relative to the version folder)."""

    name: str
    is_dir: bool
    size: int | None = None
    escapes: bool = False  # a symlink that leaves the repository: never read, never listed
    broken: bool = False  # a symlink inside the repository whose target is missing
    # The scan's stat (the one that gave ``size``): with ``size``, a key for what was derived from the file's
    # content (an ONNX graph's inputs and outputs ...), so an unchanged file is not opened again.
    mtime_ns: int | None = None
    # Whether the scan saw a symlink here (any: inside or out). A path of entries none of which is a link lies
    # inside the folder they were listed from without a further ``lstat`` of each part.
    link: bool = False

    def __init__(
        self,
        name: str,
        is_dir: bool,
        size: int | None = None,
        escapes: bool = False,
        broken: bool = False,
        mtime_ns: int | None = None,
        link: bool = False,
    ) -> None:
        d = self.__dict__
        d["name"], d["is_dir"], d["size"], d["escapes"] = name, is_dir, size, escapes
        d["broken"], d["mtime_ns"], d["link"] = broken, mtime_ns, link


@dataclass(frozen=True, init=False)
class VersionDir:
    """A subfolder of a model folder. ``number`` is None when Triton ignores it (``ignored`` says why)."""

    name: str
    path: Path
    number: int | None
    ignored: str | None = None  # Triton's own warning text when the folder is skipped
    files: tuple[FileEntry, ...] = ()

    def __init__(
        self, name: str, path: Path, number: int | None, ignored: str | None = None, files: tuple[FileEntry, ...] = ()
    ) -> None:
        d = self.__dict__
        d["name"], d["path"], d["number"], d["ignored"], d["files"] = name, path, number, ignored, files

    def has(self, name: str) -> bool:
        return any(f.name == name for f in self.files)

    def entry(self, name: str) -> FileEntry | None:
        for f in self.files:
            if f.name == name:
                return f
        return None


def _version_numbers(versions: tuple[VersionDir, ...]) -> tuple[int, ...]:
    return tuple(sorted([v.number for v in versions if v.number is not None]))


@dataclass(frozen=True, init=False)
class ModelEntry:
    """A subfolder of the repository: every one is a model to Triton, hidden ones too."""

    name: str  # folder name (may contain surrogate escapes if not UTF-8)
    path: Path
    config_path: Path
    config: model_config_pb2.ModelConfig | None  # None when missing or unparsable
    config_text: str | None = None
    config_problem: str | None = None  # why config is None although a config.pbtxt is there
    config_line: int | None = None
    config_column: int | None = None
    versions: tuple[VersionDir, ...] = ()  # every subfolder, loaded or ignored
    files: tuple[FileEntry, ...] = ()  # entries directly in the model folder (labels files live here)
    problem: str | None = None  # the model folder itself is unusable (unreadable, escaping symlink ...)
    # The scan saw no link in the model folder and its version folders, and only ASCII names: the link and
    # name rules have nothing to look at (False: not known, they look).
    plain_listing: bool = False

    def __init__(
        self,
        name: str,
        path: Path,
        config_path: Path,
        config: model_config_pb2.ModelConfig | None,
        config_text: str | None = None,
        config_problem: str | None = None,
        config_line: int | None = None,
        config_column: int | None = None,
        versions: tuple[VersionDir, ...] = (),
        files: tuple[FileEntry, ...] = (),
        problem: str | None = None,
        plain_listing: bool = False,
        *,
        path_text: str | None = None,
    ) -> None:
        d = self.__dict__
        d["name"], d["path"], d["config_path"], d["config"] = name, path, config_path, config
        d["config_text"], d["config_problem"], d["config_line"], d["config_column"] = config_text, config_problem, config_line, config_column
        d["versions"], d["files"], d["problem"], d["plain_listing"] = versions, files, problem, plain_listing
        d["facts"] = {}  # made here, where it is cheapest: every model's rules keep facts
        # and asked of every model (the versions Triton loads): kept here at once, without the descriptor's call
        d["version_numbers"] = _version_numbers(versions)
        if path_text is not None:  # the scan knows str(path) without formatting the Path (see ``path_text``)
            d["path_text"] = path_text

    @kept
    def facts(self) -> dict[Hashable, Any]:
        """What rules derive from this entry alone (its backend, the versions Triton loads ...), each
        computed once and kept here, keyed by the helper that computes it: dozens of rules ask for the
        same facts, and the entry is frozen, so they never go stale."""
        return {}

    @kept
    def path_text(self) -> str:
        """``str(path)``: the ONNX and Python step rules join file paths to it. Formatting a Path costs about
        1.5 us the first time; the scan passes the text it already has."""
        return str(self.path)

    @property
    def has_config_file(self) -> bool:
        return self.config_text is not None or self.config_problem is not None

    # Rules ask for these facts again and again (tens of thousands of times in a big repository); the
    # entry is frozen, so each is computed once and kept on the instance.
    @kept
    def version_numbers(self) -> tuple[int, ...]:
        """The loadable version folders' numbers, ascending (written by ``__init__``; this is its type)."""
        return _version_numbers(self.versions)

    def version(self, number: int) -> VersionDir | None:
        for v in self.versions:
            if v.number == number:
                return v
        return None

    @kept
    def is_ensemble(self) -> bool:
        return self.config is not None and self.config.platform == "ensemble"


@dataclass(frozen=True)
class Repository:
    root: Path
    models: tuple[ModelEntry, ...]
    location: str = ""  # what the user named (a local path or an s3:// URL)
    problems: tuple[str, ...] = ()  # repository-level problems found while scanning
    files: tuple[FileEntry, ...] = ()  # plain files at the root (Triton ignores them; the manifest lives here)

    @kept
    def _by_name(self) -> dict[str, ModelEntry]:
        # Ensemble rules look members up constantly; a 1,000-model repository made the scan quadratic.
        return {m.name: m for m in self.models}

    def model(self, name: str) -> ModelEntry | None:
        return self._by_name.get(name)


GPU_TARGET = "GPU server, all standard backends"
MANIFEST_SOURCE = "repo-builder.json"  # ValidateOptions.deploy_source when the manifest chose the image
CPU_TARGET = "CPU-only server, all standard backends"


@dataclass(frozen=True)
class ValidateOptions:
    """How to judge. The deploy target, not the machine validate runs on, decides device questions:
    by default a server with GPUs and every standard backend; ``gpu_present=False`` (``--no-gpu``)
    for a CPU fleet."""

    strict: bool = False  # Triton's --disable-auto-complete-config
    triton_release: str | None = None  # e.g. "24.08", for TensorRT version checks
    tensorrt_version: str | None = None  # e.g. "10.3.0": what plans must match; wins over triton_release
    allow_pending: bool = False  # TensorRT plans still to be compiled are warnings, not errors
    gpu_present: bool = True  # the deploy target has GPUs (KIND_GPU groups load only there)
    gpu_count: int | None = None  # how many (``--gpus N``): ids 0..N-1 exist; None: unknown
    # The target tritonserver's --http-header-forward-pattern (None: it forwards no headers; NVCF: 'NVCF-.*').
    http_header_forward_pattern: str | None = None
    # The stock image judged against (--triton-release, else the release the manifest records): what a
    # Python step may import, the Python and platform shipped packages must be built for. None: not judged.
    deploy: DeployTarget | None = None
    # What chose ``deploy`` ("--triton-release", "repo-builder.json"); with deploy None, set when the choice is
    # final and says why nothing is judged (the engine then does not look at the manifest).
    deploy_source: str | None = None
    deploy_skipped: str | None = None
    deploy_platform: str | None = None  # --platform without --triton-release: for the manifest's release
    # With step_packages "dockerfile": the top-level modules the repository's Dockerfile installs in the image.
    image_provides: tuple[str, ...] = ()
    strict_manifest: bool = False  # --strict-manifest: every built file changed since build is an error (RB002)

    @property
    def target(self) -> str:
        """The deploy target in words, for the report's first line and its JSON (``target``)."""
        return GPU_TARGET if self.gpu_present else CPU_TARGET

    @property
    def image_text(self) -> str:
        """Which image Python steps were judged in, or why none was: the report says it rather than pass."""
        deploy = self.deploy
        if deploy is None:
            return f"Python steps' imports not judged: {self.deploy_skipped or 'no --triton-release'}"
        text = f"Python steps judged in {deploy.describe()}"
        if deploy.step_packages == "dockerfile":
            text += ", with the packages the repository's Dockerfile installs"
        return text + (f" (from {self.deploy_source})" if self.deploy_source == MANIFEST_SOURCE else "")


@dataclass(frozen=True)
class RuleContext:
    repository: Repository
    options: ValidateOptions
    # Name of a model -> True when the engine has already found an error on it (ensembles are
    # judged after their members, and a refused member makes the ensemble refused).
    refused: Mapping[str, bool] = field(default_factory=dict)

    @kept
    def facts(self) -> dict[Hashable, Any]:
        """Per-run results that depend on more than one model (an ensemble's members, their verdicts),
        kept for the rules that share them; like ``ModelEntry.facts`` but living as long as the run."""
        return {}


CheckFn = Callable[[ModelEntry, RuleContext], Iterable[Finding]]


@dataclass(frozen=True)
class Rule:
    """A check with a stable code. Its docstring (``doc``) is the user manual for docs/rules.md."""

    code: str
    name: str
    severity: Severity
    check: CheckFn
    doc: str
    ensemble_only: bool = False  # run after every non-ensemble model has been judged
    field: str | None = None  # the config.pbtxt field its findings point at (their line and column)
    repository_level: bool = False  # ``check`` is a RepositoryCheckFn, run once per repository
    # Top-level ModelConfig fields the rule can find anything without (empty: none, always run). The engine
    # skips the rule for a parsed config that sets none of them (protobuf's ListFields: a message field
    # written at all, a non-empty list or map); every such rule returns at once when they are all absent.
    sections: frozenset[str] = frozenset()
    # A flag of the model's ``QuietFlags`` (analysis/quiet.py) that, when true, means the rule has nothing to
    # find (its check returns at once on the same condition): the engine then skips it without a call.
    quiet: str | None = None


RepositoryCheckFn = Callable[[RuleContext], Iterable[Finding]]


def rule(
    code: str,
    name: str,
    severity: Severity = Severity.ERROR,
    *,
    ensemble_only: bool = False,
    field: str | None = None,
    sections: tuple[str, ...] = (),
    quiet: str | None = None,
) -> Callable[[CheckFn], Rule]:
    """Decorator turning a check function into a ``Rule``; the function's docstring is its documentation."""

    def wrap(fn: CheckFn) -> Rule:
        if not fn.__doc__:
            raise TypeError(f"rule {code} ({name}) needs a docstring: it is the rule's documentation")
        doc = inspect.cleandoc(fn.__doc__)
        return Rule(code, name, severity, fn, doc, ensemble_only, field, sections=frozenset(sections), quiet=quiet)

    return wrap


def repository_rule(code: str, name: str, severity: Severity = Severity.ERROR) -> Callable[[RepositoryCheckFn], Rule]:
    """Like ``rule`` for a check of the repository as a whole (its findings name no model)."""

    def wrap(fn: RepositoryCheckFn) -> Rule:
        if not fn.__doc__:
            raise TypeError(f"rule {code} ({name}) needs a docstring: it is the rule's documentation")
        return Rule(code, name, severity, fn, inspect.cleandoc(fn.__doc__), repository_level=True)  # type: ignore[arg-type]  # one field for both kinds: repository_level says which

    return wrap
