"""A command-palette provider that offers the active bindings of the current screen as commands."""

from __future__ import annotations

from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider


class BindingCommands(Provider):
    """Every enabled binding with a description on the calling screen (and its focused widget)
    becomes a palette command, so each key is also reachable by name."""

    def _commands(self) -> list[tuple[str, str, object]]:
        seen: set[tuple[int, str]] = set()
        found: list[tuple[str, str, object]] = []
        screen = self.screen
        for key, active in screen.active_bindings.items():
            binding = active.binding
            if not active.enabled or not binding.description:
                continue
            namespace = active.node
            mark = (id(namespace), binding.action)
            if mark in seen:
                continue
            seen.add(mark)
            help_text = binding.tooltip or f"{self.app.get_key_display(binding)}  ({binding.id or binding.action})"
            found.append((binding.description, help_text,
                          partial(self.app.run_action, binding.action, namespace)))
        return found

    async def discover(self) -> Hits:
        for name, help_text, callback in self._commands():
            yield DiscoveryHit(name, callback, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, help_text, callback in self._commands():
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), callback, help=help_text)
