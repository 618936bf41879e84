"""The packages that resolve their public names lazily (slop_tui/lazy.py)."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

PACKAGES = ("slop_tui.context", "slop_tui.providers", "slop_tui.tools")


@pytest.mark.parametrize("package", PACKAGES)
def test_every_listed_name_resolves_to_its_submodules_value(package: str) -> None:
    pkg = importlib.import_module(package)
    assert set(pkg._SOURCES) <= set(dir(pkg))
    for name, module in pkg._SOURCES.items():
        value = getattr(pkg, name)
        assert value is getattr(importlib.import_module(f"{package}.{module}"), name), name
    assert set(pkg.__all__) <= set(dir(pkg))


@pytest.mark.parametrize("package", PACKAGES)
def test_an_unknown_name_is_an_attribute_error_naming_the_package(package: str) -> None:
    pkg = importlib.import_module(package)
    with pytest.raises(AttributeError, match=rf"module '{package}' has no attribute 'nope'"):
        pkg.nope  # noqa: B018
    assert not hasattr(pkg, "nope")


def test_one_submodule_does_not_import_the_others_and_a_name_imports_only_its_own() -> None:
    code = (
        "import sys\n"
        "import slop_tui.context.tiers\n"
        "before = 'slop_tui.context.summaries' in sys.modules\n"
        "import slop_tui.context as c\n"
        "f = c.redact_secrets\n"
        "print(before, 'slop_tui.context.redact' in sys.modules,"
        " 'slop_tui.context.summaries' in sys.modules, 'redact_secrets' in vars(c))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == ["False", "True", "False", "True"]
