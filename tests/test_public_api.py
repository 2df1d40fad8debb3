"""Keep every public module's ``__all__`` honest: a tuple naming exactly the public names."""

from __future__ import annotations

import importlib
import pkgutil
import types

import pytest

import vsh_ai

PUBLIC_MODULES = [
    name
    for _, name, _ in pkgutil.walk_packages(vsh_ai.__path__, "vsh_ai.")
    if not any(part.startswith("_") for part in name.split("."))
] + ["vsh_ai"]


def test_every_public_module_is_checked() -> None:
    # Discovery is automatic and silently skips what it cannot import: pin the known ones.
    assert {"vsh_ai", "vsh_ai.analysis", "vsh_ai.rules", "vsh_ai.llm", "vsh_ai.evals"} <= set(
        PUBLIC_MODULES
    )


@pytest.mark.parametrize("module_name", sorted(PUBLIC_MODULES))
def test_all_is_a_tuple_of_exactly_the_public_names(module_name: str) -> None:
    module = importlib.import_module(module_name)
    exported = module.__all__
    for name in exported:  # lazy packages (PEP 562 ``__getattr__``) define names on first use
        getattr(module, name)
    assert isinstance(exported, tuple), f"{module_name}.__all__ must be a tuple"
    assert len(set(exported)) == len(exported), "duplicates in __all__"
    public = {
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and not isinstance(value, types.ModuleType)
        and name not in {"annotations"}
    }
    missing, extra = sorted(public - set(exported)), sorted(set(exported) - public)
    assert not missing, f"{module_name}: public names missing from __all__: {missing}"
    assert not extra, f"{module_name}: __all__ names that the module does not define: {extra}"
    for name in exported:
        value = getattr(module, name)
        # Type aliases (Literal[...], Callable[...]) carry typing's or collections.abc's
        # module; everything else must be ours.
        origin = getattr(value, "__module__", "vsh_ai")
        assert origin.startswith("vsh_ai") or origin in ("typing", "collections.abc"), (
            name,
            origin,
        )


@pytest.mark.parametrize("module_name", ["vsh_ai", "vsh_ai.evals", "vsh_ai.toolset"])
def test_lazy_packages_say_no_for_unknown_names_and_list_every_name(module_name: str) -> None:
    module = importlib.import_module(module_name)
    with pytest.raises(AttributeError, match="no_such_name"):
        module.no_such_name  # noqa: B018
    assert set(module.__all__) <= set(dir(module))


def test_private_modules_declare_tuple_all() -> None:
    for _, name, _ in pkgutil.walk_packages(vsh_ai.__path__, "vsh_ai."):
        module = importlib.import_module(name)
        if hasattr(module, "__all__"):
            assert isinstance(module.__all__, tuple), name
