"""A fast yes/no JSON Schema check, compiled once into Python closures.

Why: `jsonschema` walks a report of eight cards in 15-30 ms (validator objects evolved per keyword and $ref
lookups through `referencing`), more than all the rest of an unchanged report's handling. Reports are valid
nearly always, so the common case needs only "valid?", fast; when the answer is no, `jsonschema` runs to produce
its precise, field-level errors. So this checker must never accept what `jsonschema` rejects: it implements the
keywords our schema uses with jsonschema's Draft 2020-12 semantics, and refuses to compile (the caller then uses
`jsonschema` alone) when the schema uses anything else. `tests/inventory_agents/server/test_ingest_schema_check.py`
compares both on many mutated reports.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

Check = Callable[[Any], bool]

# Keywords that only annotate (no effect on validity; `format` is an annotation unless a format checker is
# configured, and ingestion configures none).
ANNOTATIONS = frozenset(
    {
        "$schema",
        "$id",
        "$comment",
        "title",
        "description",
        "examples",
        "default",
        "format",
        "$defs",
        "definitions",
        "deprecated",
        "readOnly",
        "writeOnly",
    }
)
SUPPORTED = ANNOTATIONS | {
    "type",
    "properties",
    "required",
    "additionalProperties",
    "patternProperties",
    "items",
    "enum",
    "const",
    "pattern",
    "minLength",
    "maxLength",
    "minimum",
    "maximum",
    "maxItems",
    "$ref",
}


class Unsupported(Exception):
    """The schema uses a keyword this checker does not implement."""


def _is_type(value: Any, name: str) -> bool:
    # bool is not a number in JSON Schema; 1.0 is an integer (Draft 2020-12).
    if name == "string":
        return isinstance(value, str)
    if name == "null":
        return value is None
    if name == "boolean":
        return isinstance(value, bool)
    if name == "object":
        return isinstance(value, dict)
    if name == "array":
        return isinstance(value, list)
    if isinstance(value, bool):
        return False
    if name == "integer":
        return isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if name == "number":
        return isinstance(value, int | float)
    raise Unsupported(f"type {name!r}")


def _equal(a: Any, b: Any) -> bool:
    """JSON equality: True is not 1, recursively (jsonschema._utils.equal)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a is b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, str) != isinstance(b, str):
        return False
    return a == b


class _Compiler:
    def __init__(self, root: dict[str, Any]) -> None:
        self.root = root
        self.refs: dict[str, Check] = {}

    def ref(self, pointer: str) -> Check:
        if not pointer.startswith("#/"):
            raise Unsupported(f"$ref {pointer!r}")
        if pointer not in self.refs:
            holder: list[Check] = []
            self.refs[pointer] = lambda value: holder[0](value)  # recursion-safe: filled in below
            target: Any = self.root
            for part in pointer[2:].split("/"):
                target = target[part.replace("~1", "/").replace("~0", "~")]
            holder.append(self.compile(target))
        return self.refs[pointer]

    def compile(self, schema: Any) -> Check:
        if schema is True or schema == {}:
            return lambda value: True
        if schema is False:
            return lambda value: False
        if not isinstance(schema, dict):
            raise Unsupported("schema is not an object")
        unknown = set(schema) - SUPPORTED
        if unknown:
            raise Unsupported(", ".join(sorted(unknown)))
        checks: list[Check] = []
        if "$ref" in schema:
            checks.append(self.ref(schema["$ref"]))
        if "type" in schema:
            names = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
            for name in names:
                _is_type(None, name)  # rejects unknown type names now, not at validation time
            checks.append(lambda v, names=tuple(names): any(_is_type(v, n) for n in names))
        if "enum" in schema:
            options = list(schema["enum"])
            checks.append(lambda v, options=options: any(_equal(v, o) for o in options))
        if "const" in schema:
            checks.append(lambda v, c=schema["const"]: _equal(v, c))
        if "pattern" in schema:
            rx = re.compile(schema["pattern"])
            checks.append(lambda v, rx=rx: not isinstance(v, str) or rx.search(v) is not None)
        if "minLength" in schema:
            checks.append(lambda v, n=schema["minLength"]: not isinstance(v, str) or len(v) >= n)
        if "maxLength" in schema:
            checks.append(lambda v, n=schema["maxLength"]: not isinstance(v, str) or len(v) <= n)
        for key, op in (("minimum", float.__ge__), ("maximum", float.__le__)):
            if key in schema:
                checks.append(lambda v, n=float(schema[key]), op=op: not _is_type(v, "number") or op(float(v), n))
        if "maxItems" in schema:
            checks.append(lambda v, n=schema["maxItems"]: not isinstance(v, list) or len(v) <= n)
        if "required" in schema:
            checks.append(lambda v, req=tuple(schema["required"]): not isinstance(v, dict) or all(k in v for k in req))
        if "items" in schema:
            item = self.compile(schema["items"])
            checks.append(lambda v, item=item: not isinstance(v, list) or all(item(x) for x in v))
        if {"properties", "patternProperties", "additionalProperties"} & set(schema):
            checks.append(self._object(schema))
        if not checks:
            return lambda value: True
        if len(checks) == 1:
            return checks[0]
        return lambda v, checks=tuple(checks): all(check(v) for check in checks)

    def _object(self, schema: dict[str, Any]) -> Check:
        props = {name: self.compile(sub) for name, sub in (schema.get("properties") or {}).items()}
        patterns = [(re.compile(p), self.compile(sub)) for p, sub in (schema.get("patternProperties") or {}).items()]
        extra = schema.get("additionalProperties", True)
        extra_check = None if extra is True else self.compile(extra)

        def check(value: Any) -> bool:
            if not isinstance(value, dict):
                return True
            for key, item in value.items():
                known = False
                sub = props.get(key)
                if sub is not None:
                    known = True
                    if not sub(item):
                        return False
                for rx, pattern_check in patterns:
                    if rx.search(key):
                        known = True
                        if not pattern_check(item):
                            return False
                if not known and extra_check is not None and not extra_check(item):
                    return False
            return True

        return check


def schema_compile(schema: dict[str, Any]) -> Check:
    """A function answering "is this instance valid?"; raises Unsupported for schemas it cannot judge exactly."""
    return _Compiler(schema).compile(schema)
