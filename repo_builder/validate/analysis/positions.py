"""Where a field sits in a config.pbtxt's text: line and column for diagnostics (1-based).

Each config's text is indexed once (``config_index``: one pass of two regexes), so a diagnostic's position
costs a dictionary look-up and a binary search, whatever the quoting. Scanning the whole text per
diagnostic made a config with N findings cost N full scans: quadratic (issue 20).
"""

from __future__ import annotations

import bisect
import contextlib
import re
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import TYPE_CHECKING

from repo_builder.validate.records import Finding

if TYPE_CHECKING:
    from google.protobuf.text_format import Tokenizer

_NEWLINE = re.compile("\n")
_QUOTED = re.compile(r"'([^'\n]{1,200})'")
# A field name at the start of a line (after blanks or an opening brace/bracket/comma), then ':' '{' or '['.
_FIELD = re.compile(r"(?m)^[ \t{\[,]*([A-Za-z_][A-Za-z0-9_]*)[ \t\r\n]*[:{\[]")
# `name: "x"` / `key: 'x'` (tensors, instance groups, the model; warmup inputs and maps): the text between
# the quotes as written.
_NAMED = re.compile(r"""\b(name|key)[ \t\r\n]*:[ \t\r\n]*(?:"([^"\n]*)"|'([^'\n]*)')""")


@dataclass(frozen=True)
class ConfigIndex:
    """The first offset of every field name and of every quoted ``name``/``key``, and where lines start."""

    line_starts: tuple[int, ...]
    fields: dict[str, int]
    names: dict[str, int]  # `name: "x"`
    keys: dict[str, int]  # `key: "x"`, used when no `name` matches

    def position(self, offset: int) -> tuple[int, int]:
        line = bisect.bisect_right(self.line_starts, offset)
        return line, offset - self.line_starts[line - 1] + 1


@lru_cache(maxsize=8)
def config_index(text: str) -> ConfigIndex:
    """Index ``text`` once; the engine asks for each model's positions in turn, so a few entries suffice
    (a string's hash is cached by Python, so a hit costs no rescan)."""
    line_starts = [0, *(m.end() for m in _NEWLINE.finditer(text))]
    fields: dict[str, int] = {}
    for match in _FIELD.finditer(text):
        fields.setdefault(match.group(1), match.start(1))
    names: dict[str, int] = {}
    keys: dict[str, int] = {}
    for match in _NAMED.finditer(text):
        value = match.group(2) if match.group(2) is not None else match.group(3)
        (names if match.group(1) == "name" else keys).setdefault(value, match.start())
    return ConfigIndex(tuple(line_starts), fields, names, keys)


def field_position(text: str, field: str) -> tuple[int, int] | None:
    """The first place ``field`` is set in ``text`` (a top-level or nested field name), or None."""
    index = config_index(text)
    offset = index.fields.get(field)
    return index.position(offset) if offset is not None else None


def name_position(text: str, name: str) -> tuple[int, int] | None:
    """Where ``name: "<name>"`` (a tensor, an instance group, the model) is written, or None."""
    index = config_index(text)
    offset = index.names.get(name)
    if offset is None:
        offset = index.keys.get(name)  # warmup inputs, maps
    return index.position(offset) if offset is not None else None


# Fields of an input or output: a finding that quotes the tensor and is about one of these points at the
# tensor's own field (its dims, not its name, and never the first dims of the file).
_TENSOR_FIELDS = frozenset({"data_type", "dims", "reshape", "format", "label_filename", "is_shape_tensor",
                            "optional", "allow_ragged_batch", "is_non_linear_format_io"})


def finding_position(text: str, message: str, field: str | None) -> tuple[int, int] | None:
    """Line and column for a finding about a config: a name it quotes (that tensor's ``field`` when it
    writes one), else the field it is about."""
    for quoted in _QUOTED.findall(message):
        found = name_position(text, quoted)
        if found is not None:
            if field in _TENSOR_FIELDS:
                return tensor_field_position(text, quoted, field) or found
            return found
    return field_position(text, field) if field else None


# --- Elements: where one entry of a nested or repeated field is written ---------------------------------
# The regex index above finds the first occurrence of a field anywhere; a finding about step 2's
# input_map entry, or about one tensor's dims, needs that very entry. The text is walked once with
# protobuf's own text-format tokenizer (comments, quoting and escapes as Triton's parser reads them) into a
# tree of positions; what the fields mean still comes from the parsed ModelConfig.


@dataclass
class Element:
    """One field occurrence in a config's text: its name, where it starts (1-based), its scalar value
    (strings decoded) and the fields inside it. A list (``dims: [1, 2]``, ``step [ {..}, {..} ]``) gives
    one element per item, in order: a message item at its ``{``, a scalar item at the field's name."""

    name: str
    line: int
    column: int
    value: str | None = None
    children: list[Element] = field(default_factory=list)
    name_at: tuple[int, int] | None = None  # a list item's field name (``step [``); None: at line, column
    _by_name: dict[str, list[Element]] | None = field(default=None, repr=False)

    def named(self, name: str) -> list[Element]:
        """The occurrences of field ``name`` directly inside this one (indexed on first use: a config with
        thousands of entries and a finding on each stays linear)."""
        if self._by_name is None:
            self._by_name = {}
            for child in self.children:
                self._by_name.setdefault(child.name, []).append(child)
        return self._by_name.get(name, [])

    @property
    def position(self) -> tuple[int, int]:
        return self.line, self.column

    @property
    def field_position(self) -> tuple[int, int]:
        """Where its field's name is written: the item's own place, or its list's ``name [``."""
        return self.name_at or (self.line, self.column)


# One step of a path into the tree: a field name (all its occurrences), an index among them, or
# (field, value): the occurrences holding that field with that value (a map entry's key, a tensor's name).
PathStep = str | int | tuple[str, str]


def _scalar(tok: Tokenizer) -> str:
    """The value at the tokenizer: a string (adjacent strings joined, escapes decoded) or a bare token."""
    if tok.token[:1] in ("'", '"'):
        return tok.ConsumeString()
    value = tok.token
    tok.NextToken()
    return value


def _field_name(tok: Tokenizer) -> str:
    """A field name, or an extension/Any name written in brackets (kept as its text)."""
    if tok.token != "[":
        name = tok.token
        tok.NextToken()
        return name
    parts = []
    tok.NextToken()
    while not tok.AtEnd() and tok.token != "]":
        parts.append(tok.token)
        tok.NextToken()
    tok.NextToken()
    return "[" + "".join(parts) + "]"


def _walk(text: str, root: Element) -> None:
    """Fill ``root`` from ``text`` (iterative: nesting depth is the file's to choose)."""
    from google.protobuf import text_format  # loaded already by the scan's config parsing

    tok = text_format.Tokenizer(text.splitlines(True))
    # Frames: (element, closer) inside a message, or (parent, "]", list field name, its position) in a list.
    stack: list[tuple[Element, str, str, tuple[int, int]]] = [(root, "", "", (0, 0))]
    while not tok.AtEnd():
        parent, closer, list_name, list_at = stack[-1]
        token = tok.token
        # The tokenizer's 0-based position: no stub declares it, protobuf has kept it since 3.0.
        at = (tok._line + 1, tok._column + 1)  # type: ignore[attr-defined]
        if token in (",", ";"):
            tok.NextToken()
        elif token == closer:
            stack.pop()
            tok.NextToken()
        elif closer == "]":  # an item of a list
            if token in ("{", "<"):
                item = Element(list_name, *at, name_at=list_at)
                parent.children.append(item)
                stack.append((item, "}" if token == "{" else ">", "", at))
                tok.NextToken()
            else:
                parent.children.append(Element(list_name, *list_at, _scalar(tok)))
        elif token in ("}", ">", "]"):
            return  # unbalanced: the proto parser has refused this text already
        else:
            name = _field_name(tok)
            tok.TryConsume(":")
            if tok.token in ("{", "<"):
                item = Element(name, *at)
                parent.children.append(item)
                stack.append((item, "}" if tok.token == "{" else ">", "", at))
                tok.NextToken()
            elif tok.token == "[":
                stack.append((parent, "]", name, at))
                tok.NextToken()
            else:
                parent.children.append(Element(name, *at, _scalar(tok)))


@lru_cache(maxsize=8)
def config_elements(text: str) -> Element:
    """The tree of ``text``'s field occurrences (the root stands for the file). Text the tokenizer cannot
    read keeps what was read before it: a partial index still places the findings it covers."""
    from google.protobuf import text_format

    root = Element("", 1, 1)
    with contextlib.suppress(text_format.ParseError):
        _walk(text, root)
    return root


def element_at(text: str | None, *path: PathStep) -> Element | None:
    """The element ``path`` leads to, or the deepest one it reached (step 1's first ``input_map`` when
    no entry has the key), or None when not even its first step is written.

    ``element_at(text, "ensemble_scheduling", "step", 1, "input_map", ("key", "X"), "key")``: the ``key:``
    of step 1's ``input_map`` entry for X; ``element_at(text, "input", ("name", "x"), "dims")``: x's dims.
    """
    found = _resolve(text, path)
    return found[0] if found is not None else None


def _resolve(text: str | None, path: tuple[PathStep, ...]) -> tuple[Element, PathStep] | None:
    """``element_at``'s element and the path step that reached it."""
    if text is None:
        return None
    nodes = [config_elements(text)]
    found: tuple[Element, PathStep] | None = None
    for step in path:
        if isinstance(step, str):
            nodes = [c for n in nodes for c in n.named(step)]
        elif isinstance(step, int):
            nodes = nodes[step : step + 1] if step >= 0 else []
        else:
            key, value = step
            nodes = [n for n in nodes if any(c.value == value for c in n.named(key))]
        if not nodes:
            break
        found = nodes[0], step
    return found


def element_position(text: str | None, *path: PathStep) -> tuple[int, int] | None:
    """``element_at``'s line and column: a field's name when the path ends in one (``instance_group``,
    not the ``{`` of its first item), an item's own place when it ends choosing one (step 1's ``{``)."""
    found = _resolve(text, path)
    if found is None:
        return None
    element, step = found
    return element.field_position if isinstance(step, str) else element.position


def tensor_field_position(text: str, tensor: str, child: str) -> tuple[int, int] | None:
    """Where field ``child`` (``dims``, ``data_type`` ...) of the input or output named ``tensor`` is written:
    the tensor's own entry, not the first ``dims`` of the file; None when that tensor does not write it."""
    for kind in ("input", "output"):
        found = element_at(text, kind, ("name", tensor), child)
        if found is not None and found.name == child:
            return found.position
    return None


def placed(finding: Finding, text: str | None, *path: PathStep) -> Finding:
    """``finding`` at the element ``path`` leads to in ``text`` (its deepest written part); unchanged when
    not even the first step is written, so the engine falls back to the rule's field."""
    found = element_position(text, *path)
    if found is None:
        return finding
    return replace(finding, line=found[0], column=found[1])
