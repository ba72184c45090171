"""The footer line: the screen's key hints, as many as fit, and the palette and help keys always."""

from __future__ import annotations

from typing import Optional

from rich.text import Text
from textual import events
from textual.widgets import Static

from s3gym_tui.textgate import safe
from s3gym_tui.widgets import textual_patches
from s3gym_tui.widgets.signals import follow, release

# back, help, quit and the command palette stay visible at any width, in this order, on the right
ALWAYS = ("escape", "question_mark", "ctrl+q", "ctrl+p")
SHORT = {"ctrl+p": "keys"}


class KeyHints(Static):
    """One line of `key description` hints for the screen's shown bindings (the same the Footer
    would show), drawn as a single Text: a binding change repaints one line instead of recomposing a
    widget per key. When they do not fit, the last ones fold away and `^p all keys` says where they
    went (every binding is a command in the palette). Disabled bindings are dimmed. A click on a hint
    presses its key."""

    DEFAULT_CSS = """
    KeyHints { dock: bottom; height: 1; background: $footer-background; color: $footer-foreground;
               text-wrap: nowrap; text-overflow: clip; }
    KeyHints.-two-lines { height: 2; }
    """

    def __init__(self, *, id: Optional[str] = None) -> None:
        super().__init__("", id=id)
        self._spans: list[tuple[int, int, int, str]] = []  # (line, start, end, key) of each drawn hint
        self._drawn: Optional[tuple] = None

    def on_mount(self) -> None:
        follow(self, self.screen.bindings_updated_signal, lambda _screen: self.repaint())
        follow(self, self.app.theme_changed_signal, lambda _theme: self.repaint(force=True))
        self.repaint()

    def on_unmount(self) -> None:
        release(self)  # a signal subscription would keep this widget alive

    def on_resize(self) -> None:
        self.repaint()

    def _hints(self) -> tuple[list[tuple[str, str, str, bool]], list[tuple[str, str, str, bool]]]:
        """(screen hints, always-shown hints) as (key, shown key, description, enabled)."""
        active_bindings = self.screen.active_bindings
        always = []
        seen: set[str] = set()
        for key in ALWAYS:
            active = active_bindings.get(key)
            if active is None or not active.enabled:
                continue
            binding = active.binding
            seen.add(binding.action)
            always.append((key, safe(self.app.get_key_display(binding), one_line=True),
                           SHORT.get(key, binding.description or binding.action), True))
        hints = []
        for key, active in active_bindings.items():
            binding = active.binding
            if key in ALWAYS or not binding.show or not binding.description or binding.action in seen:
                continue
            seen.add(binding.action)
            hints.append((key, safe(self.app.get_key_display(binding), one_line=True), binding.description,
                          bool(active.enabled)))  # keys can come from the config file's keymap
        actions = {key: active.binding.action for key, active in active_bindings.items()}
        typing = self._typing_hints({h[0] for h in hints} | {a[0] for a in always})
        hints += [hint for hint, _action in typing]
        actions.update({hint[0]: action for hint, action in typing})
        first = list(getattr(self.screen, "HINTS_FIRST", ()))  # a screen's keys that must not fold away
        if first:
            rank = {action: i for i, action in enumerate(first)}
            hints.sort(key=lambda hint: rank.get(actions[hint[0]], len(first)))  # stable: the rest keep their order
        return hints, always

    def _typing_hints(self, drawn: set) -> list[tuple[tuple[str, str, str, bool], str]]:
        """While a text field has focus Textual leaves out the bindings of the keys it takes (they
        are typed into it). The screen's layout keys (HINTS_FIRST) are still shown, dimmed, so a
        person sees they exist and that esc (leaving the field) gives them back."""
        from textual.widgets import Input, TextArea

        if not isinstance(self.screen.focused, (Input, TextArea)):
            return []
        wanted = list(getattr(self.screen, "HINTS_FIRST", ()))
        found: dict[str, tuple[tuple[str, str, str, bool], str]] = {}
        for key, bindings in textual_patches.own_bindings(self.screen).key_to_bindings.items():
            for binding in bindings:
                if binding.action in wanted and binding.show and key not in drawn and binding.action not in found:
                    found[binding.action] = ((key, safe(self.app.get_key_display(binding), one_line=True),
                                              binding.description, False), binding.action)
        return [found[action] for action in wanted if action in found]

    def repaint(self, force: bool = False) -> None:
        if not self.is_mounted:
            return
        width = self.size.width or self.app.size.width
        hints, always = self._hints()
        state = (width, tuple(hints), tuple(always))
        if state == self._drawn and not force:
            return
        self._drawn = state
        v = getattr(self.app, "theme_variables", {}) or {}
        key_style = f"bold {v.get('footer-key-foreground', v.get('accent', 'yellow'))}"
        tail_items = [(k, shown, "all keys" if k == "ctrl+p" else desc, enabled)
                      for k, shown, desc, enabled in always]
        tail_len = sum(len(shown) + len(desc) + 3 for _, shown, desc, _ in tail_items)
        lines = max(1, int(getattr(self.screen, "KEY_HINT_LINES", 1)))
        need = sum(len(shown) + len(desc) + 3 for _, shown, desc, _ in hints)
        two = lines > 1 and need > width - tail_len - 2  # a second line only when one does not hold them
        text, spans = Text(), []
        folded = False
        start = 0
        if two:  # the first line: as many hints as fit the whole width, in order
            for k, shown, desc, enabled in hints:
                if len(text) + len(shown) + len(desc) + 3 > width:
                    break
                self._add(text, spans, k, shown, desc, enabled, key_style, 0)
                start += 1
            text.append(" " * (width - len(text)))
        row = 1 if two else 0
        line = Text()
        for k, shown, desc, enabled in hints[start:]:
            piece = len(shown) + len(desc) + 3
            if len(line) + piece > width - tail_len - 2:  # keep room for the fold marker
                folded = True
                break
            self._add(line, spans, k, shown, desc, enabled, key_style, row, len(line))
        if folded:
            line.append(" …", style="dim")
        pad = width - len(line) - tail_len
        if pad > 0:
            line.append(" " * pad)
        for k, shown, desc, enabled in tail_items:
            if not folded and k == "ctrl+p":
                desc = "keys"
            self._add(line, spans, k, shown, desc, enabled, key_style, row, len(line))
        if two:
            text.append("\n")
        text.append_text(line)
        self._spans = spans
        self.set_class(two, "-two-lines")
        self.update(text, layout=False)

    @staticmethod
    def _add(text: Text, spans: list, key: str, shown: str, desc: str, enabled: bool, key_style: str,
             row: int = 0, start: Optional[int] = None) -> None:
        start = len(text) if start is None else start
        text.append(f" {shown}", style=key_style if enabled else "dim")
        text.append(f" {desc} ", style="" if enabled else "dim")
        spans.append((row, start, len(text), key))

    @property
    def plain(self) -> str:
        return str(self.render())

    def on_click(self, event: events.Click) -> None:
        for row, start, end, key in self._spans:
            if row == event.y and start <= event.x < end:
                self.app.simulate_key(key)
                return
