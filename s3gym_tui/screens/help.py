"""Help: the keys of every screen (read from their bindings), the pathways and the colours."""

from __future__ import annotations

import importlib
import io
from typing import Optional

from rich import box
from rich.columns import Columns
from rich.console import Group
from rich.segment import Segment
from rich.style import Style
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.strip import Strip

from s3gym_tui.engine.glossary import METRICS, REASONS, UNDEFINED, VERDICT_LABELS, VERDICT_MARKS, VERDICT_MEANINGS
from s3gym_tui.engine.judging import VERDICTS
from s3gym_tui.widgets.commands import BindingCommands
from s3gym_tui.widgets.verdicts import legend_rows
from s3gym_tui.textgate import safe_markup
from s3gym_tui.widgets.title_bar import TitleBar
from s3gym_tui.widgets.key_hints import KeyHints
from s3gym_tui.widgets.text_view import LinesView
from s3gym_tui.widgets.thread_work import thread_work

# (title, module, class): the other screens are listed when their module exists
SCREENS = [
    ("Home", "s3gym_tui.screens.home", "HomeScreen"),
    ("Demo tour (d from Home)", "s3gym_tui.screens.tour", "TourScreen"),
    ("Play / replay / fork", "s3gym_tui.screens.play", "PlayScreen"),
    ("Protocol run", "s3gym_tui.screens.protocol", "ProtocolScreen"),
    ("Summaries (curation)", "s3gym_tui.screens.summaries", "SummariesScreen"),
    ("Compare (side by side)", "s3gym_tui.screens.compare", "CompareScreen"),
    ("Credit per action (w from Play and Compare)", "s3gym_tui.screens.credit", "CreditScreen"),
    ("Pairs", "s3gym_tui.screens.pairs", "PairsScreen"),
    ("Search (/ from any screen)", "s3gym_tui.screens.search", "SearchScreen"),
    ("Report", "s3gym_tui.screens.report", "ReportScreen"),
    ("Training", "s3gym_tui.screens.training", "TrainingScreen"),
    ("Sweeps", "s3gym_tui.screens.sweep", "SweepScreen"),
    ("ASPIRE (a from Home)", "s3gym_tui.screens.aspire", "AspireScreen"),
]

PATHWAYS = [
    ("none", "the base agent; no experience crosses episodes. Its checkpoints are the reference."),
    ("history", "previous exploration episodes step by step (Env: / LLM: Answer: ..., Score: ...) under a "
                "'Hint Messages:' header. Over the budget, the oldest are dropped and the prompt carries "
                "'[N older episode(s) dropped ...]', highlighted in the agent panel."),
    ("summary", "a versioned summary (strategies to retain, mistakes to avoid, directions for the next "
                "episode) the model writes from its own self-scores, shown under 'Hint Messages:' instead "
                "of raw history. People edit, veto or pin versions on the Summaries screen."),
]
NOTES = ("s is the model's self-judged score, r the verifier reward (never shown to the agent). "
         "Actors: model, human (take over), edit (a person changed the model's proposal, which is kept). "
         "Every key is also in the command palette (ctrl+p); keys are remapped by binding id in the config "
         "file, e.g. keymap = {step = \"j\"}.")


def key_rows(app, bindings) -> list[tuple[str, str, str]]:
    """(keys as displayed, description, binding id) of the bindings that have a description."""
    keymap = getattr(getattr(app, "settings", None), "keymap", {}) or {}
    rows = []
    for binding in bindings:
        if isinstance(binding, tuple):
            binding = Binding(*binding)
        if not binding.description:
            continue
        if binding.id and binding.id in keymap:
            keys = safe_markup(keymap[binding.id], one_line=True)  # the config file's (a Rich table cell)
        else:
            keys = ", ".join(app.get_key_display(Binding(k.strip(), binding.action))
                             for k in binding.key.split(","))
        rows.append((keys, binding.description, binding.id or ""))
    return rows


def screen_bindings() -> list[tuple[str, list]]:
    found = []
    for title, module, name in SCREENS:
        try:
            cls = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            continue
        found.append((title, list(cls.BINDINGS)))
    return found


def help_text(app) -> str:
    """The help as plain text (what the screen shows, for tests and for copying)."""
    lines = ["Everywhere"] + [f"  {k}  {d}  ({i})" for k, d, i in key_rows(app, type(app).BINDINGS)]
    for title, bindings in screen_bindings():
        lines += [title] + [f"  {k}  {d}  ({i})" for k, d, i in key_rows(app, bindings)]
    lines += ["Pathways"] + [f"  {name}: {text}" for name, text in PATHWAYS]
    lines += ["Metrics (Report, Protocol, CLI)"] + [f"  {name}: {text}" for name, text in METRICS.items()]
    lines += [f"  {UNDEFINED}:"] + [f"    {name}: {text}" for name, text in REASONS.items()]
    lines += ["Colours and marks"] + [f"  {VERDICT_MARKS[k]} {VERDICT_LABELS[k]}: {VERDICT_MEANINGS[k]}"
                                      for k in VERDICTS] + [NOTES]
    return "\n".join(lines)


def _keys_table(app, title: str, bindings) -> Table:
    table = Table(title=title, title_justify="left", title_style="bold", box=box.SIMPLE_HEAD,
                  show_header=False, padding=(0, 1), pad_edge=False)
    accent = (getattr(app, "theme_variables", {}) or {}).get("text-accent", "yellow")
    table.add_column("key", style=f"bold {accent}", no_wrap=True)
    table.add_column("action")
    for keys, description, _ in key_rows(app, bindings):
        table.add_row(keys, description)
    return table


def help_renderable(app) -> Group:
    tables = [_keys_table(app, "Everywhere", type(app).BINDINGS)]
    tables += [_keys_table(app, title, bindings) for title, bindings in screen_bindings()]
    explain = Table(box=box.SIMPLE_HEAD, show_header=False, padding=(0, 1), pad_edge=False, expand=True)
    explain.add_column("what", no_wrap=True, style="bold")
    explain.add_column("meaning", ratio=1)
    for name, text in PATHWAYS:
        explain.add_row(name, text)
    explain.add_row("", "")
    for label, text in legend_rows(app):
        explain.add_row(label, text)
    metrics = Table(box=box.SIMPLE_HEAD, show_header=False, padding=(0, 1), pad_edge=False, expand=True)
    metrics.add_column("metric", no_wrap=True, style="bold")
    metrics.add_column("meaning", ratio=1)
    for name, text in METRICS.items():
        metrics.add_row(name, text)
    metrics.add_row("", Text(f"{UNDEFINED}:", style="italic"))
    for name, text in REASONS.items():
        metrics.add_row(Text(f"  {name}", style="italic"), text)
    return Group(Text("Pathways and colours", style="bold"), explain, Text(NOTES, style="dim"), Text(""),
                 Text("Metrics (the Report's tables, the Protocol curve, s3gym report)", style="bold"), metrics,
                 Text(""), Text("Keys", style="bold"), Columns(tables, padding=(0, 3)))


READING = "Reading the keys of every screen …"
_RENDERED: dict[tuple, list[Strip]] = {}  # (width, theme, keymap) -> the help's lines: a second opening is instant


def help_lines(app, width: int) -> list[Strip]:
    """The help at `width` columns as lines. Seconds on a loaded machine (every screen's module is
    imported for its keys, and the tables of keys are measured column by column): the help screen
    calls this off the UI thread, with a console of its own."""
    from rich.console import Console

    console = Console(width=width, force_terminal=True, color_system="truecolor", legacy_windows=False,
                      file=io.StringIO())
    lines = console.render_lines(help_renderable(app), console.options.update_width(width), pad=False)
    return [Strip(list(Segment.simplify(line))) for line in lines]


class HelpView(LinesView, can_focus=True):
    """The help's lines, scrolled; a line says they are being read until they are ready. Only the lines
    on screen are drawn (a Static re-measured the whole help at every layout)."""

    DEFAULT_CSS = """
    HelpView { height: 1fr; padding: 0 2; overflow-y: scroll; }  /* its width never changes with its text */
    """

    def on_mount(self) -> None:
        self.set_lines([Strip([Segment(READING, Style(italic=True))])], [READING])

    def fit_width(self, width: int, repaint) -> None:
        self.screen.read_help(width)

    @property
    def text(self) -> str:
        return "\n".join(strip.text.rstrip() for strip in self._strips)


class HelpScreen(Screen):
    """Keys of every screen, pathways and colours. The screen opens at once; its text is made off the
    UI thread for the width it gets (help_lines) and kept for the next opening."""

    COMMANDS = {BindingCommands}
    BINDINGS = [Binding("escape,q", "app.pop_screen", "Close help", id="close_help")]

    def __init__(self) -> None:
        super().__init__()
        self._shown: Optional[tuple] = None  # the key of the lines shown

    @property
    def busy(self) -> bool:
        """True until the help's text is shown (tests' settle waits for it)."""
        return self._shown is None

    def compose(self) -> ComposeResult:
        yield TitleBar()
        yield HelpView(id="help-text")
        yield KeyHints()

    def on_mount(self) -> None:
        self.query_one(HelpView).focus()

    def _key(self, width: int) -> tuple:
        keymap = getattr(self.app.settings, "keymap", None) or {}
        return width, self.app.theme, tuple(sorted(keymap.items()))

    def read_help(self, width: int) -> None:
        """Show the help at this width: at once when it was made before, else once a worker made it."""
        key = self._key(width)
        if key == self._shown:
            return
        if key in _RENDERED:
            self._show(key, _RENDERED[key])
        else:
            self._make_lines(key)

    @thread_work(group="help-render")  # each width once; the one shown wins
    def _make_lines(self, key: tuple) -> None:
        lines = help_lines(self.app, key[0])
        self.app.call_from_thread(self._rendered, key, lines)

    def _rendered(self, key: tuple, lines: list[Strip]) -> None:
        while len(_RENDERED) >= 8:
            _RENDERED.pop(next(iter(_RENDERED)))
        _RENDERED[key] = lines
        if self.is_mounted and key == self._key(key[0]):
            self._show(key, lines)

    def _show(self, key: tuple, lines: list[Strip]) -> None:
        self._shown = key
        self.query_one(HelpView).set_lines(lines, [(key, n) for n in range(len(lines))], keep_scroll=True)
