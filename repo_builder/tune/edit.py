"""Editing a ``config.pbtxt`` in place: only the values a tune setting changes, in the original text.

A rewrite from the proto drops every comment, reorders fields and expands lists, so a two-value change
becomes a diff nobody can review. Here the text is read into a small tree of fields with their offsets
(protobuf text format: scalars, ``{}``/``<>`` messages, ``[]`` lists, ``#`` comments); the knobs' values
are replaced where they stand, and a field the file lacks is inserted beside its neighbours with the file's
indentation. ``commit`` parses the result with Triton's proto and keeps it only when it equals the
intended config. Anything this reader does not follow is an ``EditError``: the caller rewrites instead.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from repo_builder.tune.knobs import THREADS_KEY

if TYPE_CHECKING:
    from tritonclient.grpc.model_config_pb2 import ModelConfig

_TOKEN = re.compile(
    r"""(?P<space>\s+)|(?P<comment>\#[^\n]*)|(?P<string>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')"""
    r"""|(?P<word>[A-Za-z0-9_.+\-]+)|(?P<punct>[{}\[\]<>:,;])"""
)
# Where Triton's own examples put a top-level field: a new one goes after the last of those before it.
_ORDER = ("name", "platform", "backend", "max_batch_size", "input", "output", "batch_input", "batch_output",
          "optimization", "dynamic_batching", "sequence_batching", "ensemble_scheduling", "instance_group",
          "default_model_filename", "cc_model_filenames", "metric_tags", "parameters", "model_warmup")


class EditError(Exception):
    """The text is not one this editor can change in place (the caller falls back to a rewrite)."""


@dataclass(frozen=True)
class _Token:
    kind: str
    text: str
    start: int
    end: int


@dataclass
class Field:
    """One field occurrence: ``value`` spans a scalar's text, ``body`` the braces of a message."""

    name: str
    start: int  # the field name
    end: int  # after the value
    value: tuple[int, int] | None = None
    body: tuple[int, int] | None = None  # offsets of the opening and the closing brace
    children: list[Field] = field(default_factory=list)

    def named(self, name: str) -> list[Field]:
        return [c for c in self.children if c.name == name]


def _tokens(text: str) -> list[_Token]:
    out: list[_Token] = []
    pos = 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None:
            raise EditError(f"unexpected character {text[pos]!r} at offset {pos}")
        kind = match.lastgroup or ""
        if kind not in ("space", "comment"):
            out.append(_Token(kind, match.group(), match.start(), match.end()))
        pos = match.end()
    return out


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens = _tokens(text)
        self.i = 0

    def peek(self) -> _Token | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self) -> _Token:
        token = self.peek()
        if token is None:
            raise EditError("the text ends inside a field")
        self.i += 1
        return token

    def fields(self, closer: str | None) -> list[Field]:
        out: list[Field] = []
        while (token := self.peek()) is not None and token.text != closer:
            if token.text in ",;":
                self.i += 1
                continue
            name = self.take()
            if name.kind != "word":
                raise EditError(f"expected a field name at offset {name.start}, got {name.text!r}")
            out.extend(self.value(name))
        if closer is not None and self.peek() is None:
            raise EditError(f"no closing {closer!r}")
        return out

    def value(self, name: _Token) -> list[Field]:
        colon = self.peek()
        if colon is not None and colon.text == ":":
            self.i += 1
        token = self.take()
        if token.text == "[":
            items: list[Field] = []
            while (next_token := self.peek()) is not None and next_token.text != "]":
                if next_token.text == ",":
                    self.i += 1
                    continue
                items.append(self.element(name, self.take()))
            close = self.take()
            for item in items:  # each element of a list ends, as a field, after its "]"
                item.end = close.end
            return items
        return [self.element(name, token)]

    def element(self, name: _Token, token: _Token) -> Field:
        if token.text in ("{", "<"):
            children = self.fields("}" if token.text == "{" else ">")
            close = self.take()
            return Field(name.text, name.start, close.end, body=(token.start, close.start), children=children)
        if token.kind not in ("word", "string"):
            raise EditError(f"unexpected {token.text!r} at offset {token.start}")
        last = token
        while token.kind == "string" and (more := self.peek()) is not None and more.kind == "string":
            last = self.take()  # adjacent strings concatenate
        return Field(name.text, name.start, last.end, value=(token.start, last.end))


def parse_fields(text: str) -> list[Field]:
    """The top-level fields of a text-format message, each with its offsets in ``text``."""
    parser = _Parser(text)
    return parser.fields(None)


@dataclass(frozen=True)
class Edit:
    start: int
    end: int
    text: str


def apply_edits(text: str, edits: list[Edit]) -> str:
    for edit in sorted(edits, key=lambda e: e.start, reverse=True):
        text = text[: edit.start] + edit.text + text[edit.end:]
    return text


def _line_start(text: str, offset: int) -> int:
    return text.rfind("\n", 0, offset) + 1


def _indent_of(text: str, offset: int) -> str:
    """The leading whitespace of the line holding ``offset``."""
    line = text[_line_start(text, offset):offset]
    return line[: len(line) - len(line.lstrip(" \t"))]


def _unit(text: str) -> str:
    """The file's indentation step: the smallest indentation of a line, two spaces when nothing is indented."""
    widths = [m.group(1) for m in re.finditer(r"^([ \t]+)\S", text, re.MULTILINE)]
    return min(widths, key=len) if widths else "  "


def _string_value(text: str, f: Field) -> str:
    if f.value is None:
        raise EditError(f"{f.name} is a message, not a string")
    raw = text[f.value[0]:f.value[1]]
    if "\\" in raw or raw[:1] not in "\"'":
        raise EditError(f"cannot read {f.name} {raw!r} without escapes")
    return "".join(part[1:-1] for part in re.findall(r'"[^"]*"|\'[^\']*\'', raw))


def _set_scalar(text: str, parent: Field, name: str, value: str) -> Edit:
    """Replace ``name``'s value inside ``parent``; insert ``name: value`` as its last field when absent."""
    found = parent.named(name)
    if len(found) > 1 or (found and found[0].value is None):
        raise EditError(f"{parent.name}.{name} is not a single value")
    if found:
        start, end = found[0].value  # type: ignore[misc]  # checked just above
        return Edit(start, end, value)
    return _insert_in(text, parent, f"{name}: {value}")


def _line_end_after(text: str, end: int) -> int:
    """Where a new line goes after a field ending at ``end``: past a trailing comment (which stays with its
    field), else right after the field when more fields follow on its line."""
    line_end = text.find("\n", end)
    line_end = len(text) if line_end < 0 else line_end
    rest = text[end:line_end].strip()
    return line_end if not rest or rest.startswith("#") else end


def _insert_in(text: str, parent: Field, line: str) -> Edit:
    """A new line at the end of ``parent``'s body, indented like its other fields."""
    assert parent.body is not None
    open_, close = parent.body
    if parent.children:
        last = parent.children[-1]
        if _line_start(text, last.start) == _line_start(text, open_):  # a one-line message: stay on its line
            return Edit(last.end, last.end, f" {line}")
        at = _line_end_after(text, last.end)
        return Edit(at, at, f"\n{_indent_of(text, last.start)}{line}")
    if "\n" not in text[open_:close]:
        return Edit(open_ + 1, open_ + 1, f" {line} ")
    return Edit(open_ + 1, open_ + 1, f"\n{_indent_of(text, parent.start)}{_unit(text)}{line}")


def _insert_top(text: str, fields: list[Field], name: str, block: str) -> Edit:
    """``block`` as a new top-level field after the last field Triton's examples put before ``name``."""
    before = set(_ORDER[: _ORDER.index(name) + 1]) if name in _ORDER else set(_ORDER)
    anchors = [f for f in fields if f.name in before]
    if anchors:
        at = _line_end_after(text, anchors[-1].end)
        return Edit(at, at, "\n" + block)
    if not text.strip():
        return Edit(len(text), len(text), block + "\n")
    tail = "" if text.endswith("\n") else "\n"
    return Edit(len(text), len(text), tail + block + "\n")


def _top(fields: list[Field], name: str) -> list[Field]:
    return [f for f in fields if f.name == name]


def _instance_edits(text: str, fields: list[Field], original: ModelConfig, intended: ModelConfig) -> list[Edit]:
    if list(original.instance_group) == list(intended.instance_group):
        return []
    groups = _top(fields, "instance_group")
    if len(intended.instance_group) != 1 or len(groups) != len(original.instance_group) or len(groups) > 1:
        raise EditError("the instance groups change in number")
    new = intended.instance_group[0]
    if not groups:
        unit = _unit(text)
        probe = type(new)(count=new.count)
        if probe != new:
            raise EditError("a new instance group with more than a count")
        block = f"instance_group [\n{unit}{{\n{unit * 2}count: {new.count}\n{unit}}}\n]"
        return [_insert_top(text, fields, "instance_group", block)]
    node, old = groups[0], original.instance_group[0]
    if node.body is None:
        raise EditError("an instance group that is not a message")
    probe = type(old)()
    probe.CopyFrom(old)
    probe.count = new.count
    if probe != new:
        raise EditError("an instance group changes more than its count")
    return [_set_scalar(text, node, "count", str(new.count))]


def _threads_edits(text: str, fields: list[Field], original: ModelConfig, intended: ModelConfig) -> list[Edit]:
    new = intended.parameters[THREADS_KEY].string_value if THREADS_KEY in intended.parameters else None
    old = original.parameters[THREADS_KEY].string_value if THREADS_KEY in original.parameters else None
    if new == old or new is None:
        return []
    entries = [p for p in _top(fields, "parameters") if any(_string_value(text, k) == THREADS_KEY for k in p.named("key"))]
    quoted = f'"{new}"'
    if not entries:
        unit = _unit(text)
        block = f'parameters {{\n{unit}key: "{THREADS_KEY}"\n{unit}value: {{ string_value: {quoted} }}\n}}'
        return [_insert_top(text, fields, "parameters", block)]
    value = entries[-1].named("value")  # a map keeps the last entry of a key
    if len(value) != 1 or value[0].body is None:
        raise EditError(f"parameters '{THREADS_KEY}' has no single value message")
    return [_set_scalar(text, value[0], "string_value", quoted)]


def _delay_edits(text: str, fields: list[Field], original: ModelConfig, intended: ModelConfig) -> list[Edit]:
    old, new = original.dynamic_batching, intended.dynamic_batching
    if old.max_queue_delay_microseconds == new.max_queue_delay_microseconds:
        return []
    batching = _top(fields, "dynamic_batching")
    if len(batching) != 1 or batching[0].body is None:
        raise EditError("no single dynamic_batching message")
    return [_set_scalar(text, batching[0], "max_queue_delay_microseconds", str(new.max_queue_delay_microseconds))]


def edit_config_text(text: str, original: ModelConfig, intended: ModelConfig) -> str:
    """``text`` (which parses to ``original``) with the knobs that differ in ``intended`` edited in place.

    Raises ``EditError`` when the text cannot be followed; the caller checks the result parses to ``intended``.
    """
    fields = parse_fields(text)
    edits = [
        *_instance_edits(text, fields, original, intended),
        *_threads_edits(text, fields, original, intended),
        *_delay_edits(text, fields, original, intended),
    ]
    return apply_edits(text, edits)
