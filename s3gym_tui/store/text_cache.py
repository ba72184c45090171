"""A least-recently-used map bounded by the characters of the texts it keeps (the store's prompt caches)."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable, Hashable, Optional


class TextLRU:
    """Values kept least recently used first; when the characters of their texts (`text_of(value)`)
    pass `max_chars`, the oldest are dropped (the newest is always kept). Not thread-safe by itself."""

    def __init__(self, max_chars: int, text_of: Callable[[Any], str]) -> None:
        self.max_chars = max_chars
        self._text_of = text_of
        self._items: "OrderedDict[Hashable, Any]" = OrderedDict()
        self.chars = 0

    def get(self, key: Hashable) -> Optional[Any]:
        return self._items.get(key)

    def touch(self, key: Hashable) -> None:
        """Mark `key` as the most recently used."""
        self._items.move_to_end(key)

    def pop(self, key: Hashable) -> Optional[Any]:
        value = self._items.pop(key, None)
        if value is not None:
            self.chars -= len(self._text_of(value))
        return value

    def put(self, key: Hashable, value: Any) -> None:
        self.pop(key)
        self._items[key] = value
        self.chars += len(self._text_of(value))
        while self.chars > self.max_chars and len(self._items) > 1:
            _, dropped = self._items.popitem(last=False)
            self.chars -= len(self._text_of(dropped))

    def values(self) -> list[Any]:
        """The values, least recently used first."""
        return list(self._items.values())

    def clear(self) -> None:
        self._items.clear()
        self.chars = 0

    def __len__(self) -> int:
        return len(self._items)
