"""A registry of classes by name, as LeRobot registers its robots and cameras: one per family
(policy types, rig kinds), filled by a class decorator."""

from __future__ import annotations

from collections.abc import Iterator


class Registry[T]:
    """`registry.register(name)` decorates a subclass of `base`; `registry[name]` returns it.
    The registered class gets `name` as its `attribute` (e.g. `type_name`, `kind`)."""

    # `base` is typed `type`, not `type[T]`: the base is abstract, and mypy accepts only a concrete
    # class for `type[T]`.
    def __init__(self, family: str, base: type, attribute: str):
        self.family, self.base, self.attribute = family, base, attribute
        self._classes: dict[str, type[T]] = {}

    def register(self, name: str):
        def decorate(cls: type[T]) -> type[T]:
            if not (isinstance(cls, type) and issubclass(cls, self.base)):
                raise TypeError(f"{cls!r} is not a {self.base.__name__}")
            if self._classes.get(name, cls) is not cls:
                raise ValueError(f"{self.family} {name!r} is already registered by {self._classes[name].__name__}")
            self._classes[name] = cls
            setattr(cls, self.attribute, name)
            return cls
        return decorate

    def __getitem__(self, name: str) -> type[T]:
        return self._classes[name]

    def __contains__(self, name: object) -> bool:
        return name in self._classes

    def __iter__(self) -> Iterator[str]:
        return iter(self._classes)
