"""A YAML file validated by a pydantic model, every problem one `path:line:col: message` line:
pydantic's error locations mapped to the file's lines (`core.yamlsrc.SourceMap`), union-branch
tags dropped from them, and a did-you-mean for an unknown key from the fields of the model that
owns it. Used for the protocol, the layout, the rig profile and a comparison suite."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from orchestrator.core.errors import BadInput
from orchestrator.core.yamlsrc import SourceMap, load_yaml_mapping

OwnerOf = Callable[[dict, tuple], "type[BaseModel] | None"]


def _fields_of(model: type[BaseModel] | None) -> list[str]:
    return list(model.model_fields) if model else []


def _model_at(root: type[BaseModel], loc: tuple) -> type[BaseModel] | None:
    """The pydantic model class that owns the mapping at `loc` (for did-you-mean hints)."""
    model: Any = root
    for part in loc:
        if isinstance(part, int) or model is None:
            if isinstance(part, int) and model is not None:
                continue
            return None
        field = getattr(model, "model_fields", {}).get(part)
        if field is None:
            return None
        model = _inner_model(field.annotation)
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


def _inner_model(annotation: Any) -> Any:
    import typing

    args = typing.get_args(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in args:
        found = _inner_model(arg)
        if found is not None:
            return found
    return None


def _clean_loc(loc: tuple, data: Any = None, tags: Collection[str] = ()) -> tuple:
    """Drop pydantic's union-branch tags (a discriminator value in `tags`, e.g. 'scripted', or a
    class name, e.g. 'EValueStopping') from a loc.

    A part is a tag only where the YAML data has no such key: policy labels such as `A` or
    `B` look like class names but are real keys and must stay.
    """
    out: list = []
    node = data
    for part in loc:
        present = False
        if isinstance(node, dict) and part in node:
            present, node = True, node[part]
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            present, node = True, node[part]
        looks_like_tag = isinstance(part, str) and (
            part in tags or part[:1].isupper()
            or part.startswith("literal[") or part.startswith("function-"))
        if looks_like_tag and not present:
            continue
        if not present:
            node = None
        out.append(part)
    return tuple(out)


def format_validation_errors(error: ValidationError, smap: SourceMap, root: type[BaseModel], data: dict,
                             tags: Collection[str] = (), owner_of: OwnerOf | None = None) -> list[str]:
    """One `path:line:col: message` line per pydantic error, with did-you-mean for unknown keys.
    `tags`: the discriminator values of the model's unions; `owner_of(data, loc)`: the model
    owning a mapping the field annotations cannot tell (a union chosen by a key's value)."""
    lines: list[str] = []
    seen: set[str] = set()
    for err in error.errors():
        loc = _clean_loc(tuple(err["loc"]), data, tags)
        # keys come from the user's file: escape control characters so a message stays one line
        dotted = ".".join(str(p) if str(p).isprintable() else repr(str(p))[1:-1]
                          for p in loc) or "(top level)"
        if err["type"] == "extra_forbidden":
            key = str(loc[-1])
            owner = _model_at(root, loc[:-1])
            if owner is None and owner_of is not None:
                owner = owner_of(data, loc)
            hint = difflib.get_close_matches(key, _fields_of(owner), n=1)
            msg = f"unknown key {dotted!r}" + (f" (did you mean {hint[0]!r}?)" if hint else "")
        elif err["type"] == "missing":
            msg = f"missing required key {dotted!r}"
        elif err["type"] == "union_tag_invalid":   # a `type:` no class is registered under
            ctx = err.get("ctx") or {}
            given, known = str(ctx.get("tag", "")), str(ctx.get("expected_tags", "")).replace("'", "").split(", ")
            hint = difflib.get_close_matches(given, known, n=1)
            msg = (f"{dotted}: unknown {str(ctx.get('discriminator', 'type')).strip("'")} {given!r}"
                   + (f" (did you mean {hint[0]!r}?)" if hint else "") + f"; known: {', '.join(known)}")
        else:
            text = err["msg"].removeprefix("Value error, ")
            msg = f"{dotted}: {text}"
        line = f"{smap.locate(loc)}: {msg}"
        if line not in seen:
            seen.add(line)
            lines.append(line)
    return lines


def load_validated[M: BaseModel](path: Path, what: str, model: type[M], tags: Collection[str] = (),
                                 owner_of: OwnerOf | None = None) -> tuple[M, dict, SourceMap, str]:
    """`path` read as a YAML mapping (`load_yaml_mapping`) and validated as `model`: (the model,
    the data, its source map, the text); `BadInput` with one located line per problem."""
    data, smap, text = load_yaml_mapping(path, what)
    try:
        return model.model_validate(data), data, smap, text
    except ValidationError as exc:
        raise BadInput(format_validation_errors(exc, smap, model, data, tags, owner_of)) from None


def repeated_values(data: dict, smap: SourceMap, items: str, key: str, what: str) -> list[str]:
    """One located line per repeated `key` value among the mappings of the list `items` of
    `data` (`mark id 'M07' is used twice (first at line 12)`), at the repeat."""
    entries = data.get(items)
    if not isinstance(entries, list):
        return []
    first: dict[str, int] = {}
    lines = []
    for index, entry in enumerate(entries):
        value = entry.get(key) if isinstance(entry, dict) else None
        if not isinstance(value, str):
            continue
        if value in first:
            line = smap.positions.get((items, first[value], key), (0, 0))[0]
            lines.append(f"{smap.locate((items, index, key))}: {what} {value!r} is used twice (first at line {line})")
        else:
            first[value] = index
    return lines
