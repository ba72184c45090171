"""A command-palette provider that offers the bindings of the current screen (and the app) as commands."""

from __future__ import annotations

from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider

from s3gym_tui.widgets import textual_patches


class BindingCommands(Provider):
    """Every enabled binding with a description on the calling screen (its focused widget's, the
    screen's own and the app's) becomes a palette command, so each key is also reachable by name.

    The screen's and the app's own bindings are offered even while a text field has the focus and
    takes their keys for typing (Textual then leaves them out of the active bindings): a command
    needs no key, and "pairs" must find Compare pairs whether or not the seed field has the focus."""

    def _bindings(self) -> list[tuple[object, object, bool]]:
        """(namespace, binding, enabled): the active ones first, then the screen's and the app's own."""
        screen, app = self.screen, self.app
        found = [(active.node, active.binding, active.enabled) for active in screen.active_bindings.values()]
        keymap = textual_patches.app_keymap(app)
        for node in (screen, app):
            bindings = textual_patches.own_bindings(node).copy()
            if keymap:
                bindings.apply_keymap(keymap)
            for _key, binding in bindings:
                allowed = node.check_action(binding.action, ()) if "." not in binding.action else True
                if allowed is not False:
                    found.append((node, binding, bool(allowed)))
        return found

    def _commands(self) -> list[tuple[str, str, object]]:
        seen: set[tuple[int, str]] = set()
        found: list[tuple[str, str, object]] = []
        for namespace, binding, enabled in self._bindings():
            if not enabled or not binding.description:
                continue
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
