"""The `[keymap]` table of config.toml, and the F1 help rows built from bindings.

Every binding that a user may remap has a stable `id`; `[keymap]` maps ids
to keys (`focus_prompt = "f3"`, or several keys: `quit = "ctrl+q,f10"`).
Unknown ids and empty keys become one-line warnings; the rest goes to
`App.set_keymap`, which replaces the default key of each named binding.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from textual.app import App
from textual.binding import Binding
from textual.dom import DOMNode
from textual.screen import Screen


@dataclass(frozen=True)
class BindingInfo:
    """One remappable binding: its id, default keys, action and description."""

    id: str
    key: str
    action: str
    description: str
    owner: str  # the class that declares it, e.g. "SlopApp"


def _class_bindings(cls: type[DOMNode]) -> Iterator[Binding]:
    """Bindings declared by `cls` itself (not inherited)."""
    declared = cls.__dict__.get("BINDINGS") or ()
    yield from Binding.make_bindings(declared)


def _subclasses(root: type) -> Iterator[type]:
    stack = list(root.__subclasses__())
    seen: set[type] = set()
    while stack:
        cls = stack.pop()
        if cls in seen:
            continue
        seen.add(cls)
        yield cls
        stack.extend(cls.__subclasses__())


def _binding_classes(app: App, extra: Iterable[type[DOMNode]]) -> list[type[DOMNode]]:
    """The app's class, every mounted node's class, every DOMNode class of the app's
    package that has been imported, and `extra` (for screens imported lazily)."""
    package = type(app).__module__.partition(".")[0]
    classes: list[type[DOMNode]] = [*type(app).__mro__]
    if app.is_running:
        for screen in app.screen_stack:
            classes.extend(type(node) for node in screen.walk_children(with_self=True))
    classes.extend(c for c in _subclasses(DOMNode) if c.__module__.partition(".")[0] == package)
    classes.extend(extra)
    unique: dict[type, None] = {}
    for cls in classes:
        for base in getattr(cls, "__mro__", ()):
            if isinstance(base, type) and issubclass(base, DOMNode):
                unique.setdefault(base, None)
    return list(unique)


def known_bindings(app: App, extra: Iterable[type[DOMNode]] = ()) -> dict[str, BindingInfo]:
    """Every binding with an id that the app (or `extra` classes) declares, by id."""
    found: dict[str, BindingInfo] = {}
    for cls in _binding_classes(app, extra):
        for binding in _class_bindings(cls):
            if binding.id and binding.id not in found:
                found[binding.id] = BindingInfo(
                    binding.id, binding.key, binding.action, binding.description, cls.__name__
                )
    return found


def check_keymap(
    app: App, keymap: Mapping[str, str], extra: Iterable[type[DOMNode]] = ()
) -> tuple[dict[str, str], list[str]]:
    """Split `[keymap]` into the usable entries and one warning per bad entry."""
    known = known_bindings(app, extra)
    good: dict[str, str] = {}
    warnings: list[str] = []
    for binding_id, keys in keymap.items():
        if binding_id not in known:
            close = difflib.get_close_matches(binding_id, list(known), n=1)
            hint = f"did you mean '{close[0]}'?" if close else "see F1 for the binding ids."
            warnings.append(f"[keymap] unknown binding id '{binding_id}' ignored; {hint}")
            continue
        cleaned = ",".join(k.strip() for k in str(keys).split(",") if k.strip())
        if not cleaned:
            warnings.append(f"[keymap] '{binding_id}' has no key; keeping its default.")
            continue
        good[binding_id] = cleaned
    return good, warnings


def apply_keymap(
    app: App, keymap: Mapping[str, str], extra: Iterable[type[DOMNode]] = ()
) -> list[str]:
    """Validate `[keymap]` against the app's binding ids and apply it with `set_keymap`.

    Returns one-line warnings (unknown ids, empty keys); never raises. Call it
    after the classes that declare bindings are imported (pass lazily
    imported screens in `extra`).
    """
    good, warnings = check_keymap(app, keymap, extra)
    app.set_keymap(good)
    return warnings


def binding_help_rows(node: App | Screen) -> list[tuple[str, str, str]]:
    """(id, keys, description) for every binding active now, for the F1 help.

    Rows follow Textual's binding chain: the focused widget first, then its
    parents, the screen and the app. Keys remapped by `[keymap]` show their
    new key; several keys for one binding are joined with ", ". System
    bindings and bindings with neither an id nor a description are left out.
    """
    screen = node.screen if isinstance(node, App) else node
    app = screen.app
    rows: dict[tuple[int, str], tuple[str, list[str], str]] = {}
    for active in screen.active_bindings.values():
        binding = active.binding
        if binding.system or not (binding.id or binding.description):
            continue
        slot = (id(active.node), binding.id or binding.action)
        display = app.get_key_display(binding)
        if slot in rows:
            keys = rows[slot][1]
            if display not in keys:
                keys.append(display)
            continue
        rows[slot] = (binding.id or "", [display], binding.description or binding.action)
    return [(bid, ", ".join(keys), text) for bid, keys, text in rows.values()]


def binding_help_markdown(node: App | Screen) -> str:
    """The help rows as a Markdown table (key, what it does, keymap id)."""
    lines = ["| key | what it does | keymap id |", "|---|---|---|"]
    for bid, keys, text in binding_help_rows(node):
        lines.append(f"| `{keys}` | {text} | {f'`{bid}`' if bid else ''} |")
    return "\n".join(lines)
