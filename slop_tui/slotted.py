"""Cheap construction of frozen slots dataclasses (the records built per history row).

A frozen dataclass's `__init__` stores every field through
`object.__setattr__`, because the class's own `__setattr__` refuses writes:
for a 12-field record that is a dozen slow calls, several microseconds per
object, i.e. several milliseconds for the 2,000 rows of a long session, paid
once when the ledger maps the rows to `Message`s and once more when the
context engine builds the `PromptMessage`s.

`positional_builder` fills a *draft*: a plain class with the very same slots,
where each store is CPython's fast attribute path, then makes the object an
instance of the frozen class by `__class__` assignment (allowed because the two
layouts are identical; CPython checks that). The result is indistinguishable
from one made by the constructor, and frozen like it, at about a quarter of the
cost. Only construction changes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

# Names the generated builder uses besides the fields' own.
_BUILDER_NAMES = frozenset({"_new", "_draft", "_cls", "_obj"})


def _slot_fields(cls: type) -> tuple[dataclasses.Field, ...]:
    """The fields of a frozen slots dataclass built directly on `object`; TypeError otherwise."""
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen or "__slots__" not in cls.__dict__:
        raise TypeError(f"{cls.__name__} is not a frozen slots dataclass")
    if cls.__bases__ != (object,):
        raise TypeError(f"{cls.__name__} inherits slots, which a draft could not mirror")
    if hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__} has __post_init__, which a builder would skip")
    fields = dataclasses.fields(cls)
    if not fields:
        raise TypeError(f"{cls.__name__} has no fields")
    for f in fields:
        if not f.init or f.kw_only:
            raise TypeError(f"{cls.__name__}.{f.name}: only plain positional fields are supported")
    if tuple(cls.__slots__) != tuple(f.name for f in fields):
        raise TypeError(f"{cls.__name__}'s slots are not exactly its fields")
    clash = _BUILDER_NAMES.intersection(f.name for f in fields)
    if clash:
        raise TypeError(f"{cls.__name__}: field name(s) {', '.join(sorted(clash))} are reserved")
    return fields


def positional_builder(cls: type[T]) -> Callable[..., T]:
    """A function taking every field positionally, in declaration order, with no
    defaults (a database row selected in that column order is `build(*row)`) and
    returning the instance; a wrong number of values raises TypeError."""
    fields = _slot_fields(cls)
    draft = type(f"_{cls.__name__}Draft", (), {"__slots__": cls.__slots__})
    names = [f.name for f in fields]
    lines = ["_obj = _new(_draft)"]
    lines += [f"_obj.{name} = {name}" for name in names]
    lines += ["_obj.__class__ = _cls", "return _obj"]
    name = f"build_{cls.__name__}"
    source = f"def {name}({', '.join(names)}):\n" + "".join(f"    {x}\n" for x in lines)
    namespace: dict[str, Any] = {"_new": object.__new__, "_draft": draft, "_cls": cls}
    exec(source, namespace)  # noqa: S102 - generated from field names only, like dataclasses
    build = namespace[name]
    build.__doc__ = f"A {cls.__name__} from its {len(fields)} field values, in order."
    build(*(None,) * len(fields))  # a layout CPython refuses fails here, at import
    return build
