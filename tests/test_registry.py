import pytest

from polymask.modalities import MODALITIES
from polymask.objectives import OBJECTIVES
from polymask.registry import Registry, UnknownNameError


def test_register_get_names_round_trip():
    registry: Registry[type] = Registry("widget")

    @registry.register("b")
    class B: ...

    @registry.register("a")
    class A: ...

    assert registry.get("a") is A and registry.get("b") is B
    assert registry.names() == ["a", "b"]
    assert "a" in registry and "c" not in registry


def test_unknown_name_lists_choices():
    registry: Registry[type] = Registry("widget")
    registry.register("only")(object)
    with pytest.raises(UnknownNameError, match=r"unknown widget 'nope'; choose one of: only"):
        registry.get("nope")


def test_duplicate_name_is_an_error():
    registry: Registry[type] = Registry("widget")
    registry.register("x")(int)
    with pytest.raises(ValueError, match="already registered"):
        registry.register("x")(str)


def test_the_same_class_defined_again_replaces_it():
    """A re-run notebook cell or a reloaded plugin defines the class anew under the same module and name."""
    registry: Registry[type] = Registry("widget")

    def define() -> type:
        class Widget:
            pass
        return Widget

    first, second = define(), define()
    registry.register("w")(first)
    registry.register("w")(second)
    assert registry.get("w") is second
    other = type("Widget", (), {"__module__": "elsewhere"})
    with pytest.raises(ValueError, match="already registered"):
        registry.register("w")(other)


def test_builtins_are_registered():
    assert {"smiles", "dna", "text"} <= set(MODALITIES.names())
    assert "mlm" in OBJECTIVES
