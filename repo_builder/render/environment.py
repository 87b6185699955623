"""The Jinja2 environment: strict (an undefined name is an error, never an empty string), loading from a
user's ``--templates DIR`` first and the shipped templates second."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from repo_builder.errors import UserError
from repo_builder.paths import templates_dir

if TYPE_CHECKING:
    import jinja2

_PY_LITERALS = (str, int, float, bool, type(None))


def py_literal(value: Any) -> str:
    """A Python literal for a generated model.py; only plain data may cross into generated code."""

    def check(v: Any) -> None:
        if isinstance(v, dict):
            for k, item in v.items():
                check(k)
                check(item)
        elif isinstance(v, list | tuple):
            for item in v:
                check(item)
        elif not isinstance(v, _PY_LITERALS):
            raise TypeError(f"cannot write {type(v).__name__} {v!r} into generated Python")

    check(value)
    return repr(value)


def pb_string(value: Any) -> str:
    """A protobuf text-format string literal (double-quoted, C escapes; JSON's \\u escapes are not valid there)."""
    text = str(value)
    out = []
    for ch in text:
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\{ord(ch):03o}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def make_environment(user_dir: Path | None = None) -> jinja2.Environment:
    """Build the strict environment; ``user_dir`` (``--templates``) overrides shipped templates by name."""
    import jinja2

    searchpath: list[str] = []
    if user_dir is not None:
        if not user_dir.is_dir():
            raise UserError(f"--templates {user_dir}: not a folder; pass a copy of the shipped templates/ folder")
        searchpath.append(str(user_dir))
    searchpath.append(str(templates_dir()))
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(searchpath),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=False,
        lstrip_blocks=False,
        autoescape=False,
    )
    env.filters["py"] = py_literal
    env.filters["pbstr"] = pb_string
    # The Python shipped packages are built for (model/_site_packages.py.j2); build sets the target's.
    # None: nothing shipped, every Python uses its own environment's packages.
    env.globals["ship_python"] = None
    return env
