"""The agent panel: what the model saw (the prompt as sent), what it said, what it did, what it cost."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Optional, Sequence

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from s3gym_tui.engine.judging import verdict
from s3gym_games.prompt import HINT_HEADER, HISTORY_CUT_MARK
from s3gym_tui.models import Episode, Step
from s3gym_tui.textgate import safe, safe_text
from s3gym_tui.widgets.signals import follow, release
from s3gym_tui.widgets.text_view import TextView
from s3gym_tui.widgets.verdicts import (judged_value, judgement_text, range_note, range_note_text,
                                        self_score_value)

CUT_PATTERN = re.compile(re.escape(HISTORY_CUT_MARK).replace(re.escape("{n}"), r"\d+"))
HINT_END = ("\n\nCurrent episode so far:", "\n\nGame rules:")
REPLY_DISPLAY_CAP = 20_000


@dataclass(frozen=True)
class StepView:
    """A stored step or a pending proposal, as the panel shows it."""

    title: str
    prompt: str  # messages JSON as sent ("" when none, e.g. a human step)
    reply: str
    action: Optional[str]
    actor: str = "model"
    proposed_action: Optional[str] = None
    self_score: Optional[float] = None
    reward: Optional[float] = None  # None for a proposal (not executed)
    valid: Optional[bool] = None
    feedback: str = ""
    fault: Optional[str] = None
    tokens_in: int = 0
    tokens_out: int = 0
    latency_ms: float = 0.0
    cost: Optional[float] = None
    tokens_cached: Optional[int] = None  # of tokens_in, read from the provider's prompt cache (None: not said)
    range_note: Optional[str] = None  # the self-score is out of its game's step range: what one step can pay

    @classmethod
    def of_step(cls, step: Step, prompt: str, game: Optional[str] = None, mode: Optional[str] = None) -> "StepView":
        """A stored step; with its episode's `game` and `mode`, an out-of-range self-score is noted."""
        return cls(title=f"step {step.index}", prompt=prompt, reply=step.reply, action=step.action,
                   actor=step.actor, proposed_action=step.proposed_action, self_score=step.self_score,
                   reward=step.reward, valid=step.valid, feedback=step.feedback, fault=step.fault,
                   tokens_in=step.tokens_in, tokens_out=step.tokens_out, latency_ms=step.latency_ms,
                   cost=step.cost, tokens_cached=step.tokens_cached,
                   range_note=range_note(game, mode, step.self_score))


def _theme(app) -> dict[str, str]:
    return getattr(app, "theme_variables", {}) or {}


def format_prompt_lines(prompt_json: str, app=None) -> tuple[list[Text], bool, bool]:
    """The messages as readable lines, the Hint Messages block and the history cut marked.
    Returns (lines, hint_marked, cut_marked). Built line by line (prompts reach ~100k tokens)."""
    v = _theme(app)
    accent = v.get("text-accent", "yellow")
    warning = v.get("text-warning", "yellow")
    secondary = v.get("text-secondary", "cyan")
    try:
        messages = json.loads(prompt_json)
        if not isinstance(messages, list):
            raise ValueError
    except ValueError:
        messages = [{"role": "prompt", "content": prompt_json}]
    lines: list[Text] = []
    hint_marked = cut_marked = False
    for message in messages:
        role = str(message.get("role", "?")) if isinstance(message, dict) else "?"
        content = message.get("content", "") if isinstance(message, dict) else str(message)
        if not isinstance(content, str):
            content = json.dumps(content, ensure_ascii=False)
        key = (role, content, accent, warning, secondary)
        cached = _MESSAGE_LINES.get(key)
        if cached is None:
            cached = _message_lines(role, content, accent, warning, secondary)
            _MESSAGE_LINES[key] = cached
            while len(_MESSAGE_LINES) > 16:
                _MESSAGE_LINES.pop(next(iter(_MESSAGE_LINES)))
        message_lines, hint, cut = cached
        lines.extend(message_lines)
        hint_marked, cut_marked = hint_marked or hint, cut_marked or cut
    return lines, hint_marked, cut_marked


_MESSAGE_LINES: dict[tuple, tuple[list[Text], bool, bool]] = {}  # consecutive prompts repeat messages


def _message_lines(role: str, content: str, accent: str, warning: str,
                   secondary: str) -> tuple[list[Text], bool, bool]:
    """One message as lines (its role, its content, a blank), with the marks styled. The text goes
    through the gate before it becomes a Rich Text (a Text drops BEL, backspace, VT, FF and CR
    without a trace; the gate shows them: ␇ ␈), and the marks are found in the gated text."""
    content = safe(content, max_chars=None)
    lines = [Text(f" {safe(role, one_line=True)} ", style="bold reverse")]
    hint_marked = cut_marked = False
    marks: list[tuple[int, int, str]] = []  # (start, end, style) in content offsets
    at = content.find(HINT_HEADER)
    if at >= 0:
        ends = [content.find(marker, at) for marker in HINT_END]
        end = min([e for e in ends if e >= 0], default=len(content))
        marks.append((at, end, secondary))
        marks.append((at, at + len(HINT_HEADER), f"bold reverse {accent}"))
        hint_marked = True
    for match in CUT_PATTERN.finditer(content):
        marks.append((match.start(), match.end(), f"bold reverse {warning}"))
        cut_marked = True
    offset = 0
    for raw in content.split("\n"):
        line = Text(raw)
        for a, b, style in marks:
            if a < offset + len(raw) and b > offset:
                line.stylize(style, max(0, a - offset), min(len(raw), b - offset))
        lines.append(line)
        offset += len(raw) + 1
    lines.append(Text(""))
    return lines, hint_marked, cut_marked


def format_prompt(prompt_json: str, app=None) -> tuple[Text, bool, bool]:
    """format_prompt_lines joined into one Text."""
    lines, hint, cut = format_prompt_lines(prompt_json, app)
    return Text("\n").join(lines), hint, cut


def usage_parts(label: str, tokens_in: int, tokens_out: int, latency_ms: float,
                cost: Optional[float], cached: Optional[int] = None) -> list[str]:
    """The figures of a call (or of all calls): `label: N in`, `N out`, `N ms`, the cost. `cached`: input
    tokens read from the provider's prompt cache (None: not said, not shown)."""
    money = "—" if cost is None else f"${cost:.4f}"
    read = f" ({cached:,} cached)" if cached is not None else ""
    return [f"{label}: {tokens_in:,} in{read}", f"{tokens_out:,} out", f"{latency_ms:,.0f} ms", money]


def usage_line(label: str, tokens_in: int, tokens_out: int, latency_ms: float,
               cost: Optional[float], cached: Optional[int] = None) -> str:
    return " · ".join(usage_parts(label, tokens_in, tokens_out, latency_ms, cost, cached))


def figure_lines(parts: Sequence[str], width: int, separator: str = " · ") -> list[str]:
    """`parts` joined by `separator`, a new line between two parts where the next would not fit: a part
    (a figure with its unit) is never cut. A part wider than the whole width has a line of its own."""
    lines: list[str] = []
    for part in parts:
        if lines and len(lines[-1]) + len(separator) + len(part) <= width:
            lines[-1] += separator + part
        else:
            lines.append(part)
    return lines or [""]


class FiguresLine(Static):
    """A line of figures (the call's usage, the totals) that wraps between figures instead of cutting
    one: a row more when the panel is narrow. The layout is asked again only when the row count
    changes (a new step's figures mostly keep it)."""

    DEFAULT_CSS = """
    FiguresLine { height: auto; }
    """

    def __init__(self, *, id: Optional[str] = None, classes: Optional[str] = None) -> None:
        super().__init__("", id=id, classes=classes)
        self.parts: list[str] = []

    def set_parts(self, parts: Sequence[str]) -> None:
        parts = [safe(p, one_line=True) for p in parts]
        if parts == self.parts:
            return
        width = self.content_region.width
        rows = len(figure_lines(self.parts, width)) if width else 0
        self.parts = parts
        self.refresh(layout=not width or len(figure_lines(parts, width)) != rows)

    @property
    def text(self) -> str:
        return " · ".join(self.parts)

    def get_content_height(self, container, viewport, width: int) -> int:
        return len(figure_lines(self.parts, max(1, width)))

    def render(self) -> Text:
        return Text("\n".join(figure_lines(self.parts, max(1, self.content_region.width))))


class SectionTitle(Static):
    """The title line of a section of the panel; a click folds or unfolds the section's body."""

    DEFAULT_CSS = """
    SectionTitle { height: 1; background: $foreground 6%; color: $text-muted; text-style: bold;
                   text-wrap: nowrap; text-overflow: ellipsis; }
    SectionTitle:hover { color: $text; }
    """

    def __init__(self, title: str, body_id: str, *, id: Optional[str] = None) -> None:
        super().__init__("", id=id)
        self.body_id = body_id
        self._title = ""
        self.title = title

    @property
    def title(self) -> str:
        return self._title

    @title.setter
    def title(self, value: str) -> None:
        if value != self._title:
            self._title = value
            self._paint()

    @property
    def folded(self) -> bool:
        try:
            return not self.screen.query_one(f"#{self.body_id}").display
        except Exception:  # noqa: BLE001 - not mounted yet
            return False

    def _paint(self) -> None:
        self.update(safe_text(("▶ " if self.folded else "▼ ") + self._title, one_line=True), layout=False)

    def on_click(self) -> None:
        body = self.screen.query_one(f"#{self.body_id}")
        body.display = not body.display
        self._paint()


class ClampedText(Static):
    """Text wrapped to the width, at most the widget's height in lines; when there is more, the last
    line says how much and where to read it all (`i`: the agent panel over the whole screen, where
    the height is the text's own). Replaces a fixed two lines that cut the text with no sign."""

    MORE = "  … +{n} more line{s} (i shows all)"

    def __init__(self, *, id: Optional[str] = None, classes: Optional[str] = None) -> None:
        super().__init__("", id=id, classes=classes)
        self.full = Text()

    def set_text(self, text: Text) -> None:
        self.full = text
        self.refresh(layout=self.styles.height is not None and self.styles.height.is_auto)

    def _wrapped(self, width: int) -> list[Text]:
        return list(self.full.wrap(self.app.console, max(1, width)))

    def get_content_height(self, container, viewport, width: int) -> int:
        return max(1, len(self._wrapped(width)))

    def render(self) -> Text:
        width, height = self.content_region.width, self.content_region.height
        if width <= 0 or height <= 0:
            return self.full
        lines = self._wrapped(width)
        if len(lines) <= height:
            return self.full
        hidden = len(lines) - height + 1
        more = Text(self.MORE.format(n=hidden, s="" if hidden == 1 else "s"), style="italic")
        last = lines[height - 1].copy()
        last.rstrip()
        room = max(0, width - len(more))
        if len(last) > room:  # cut between words: a figure (a reward, a coordinate) is never cut in two
            space = last.plain.rfind(" ", 0, room + 1)
            last.truncate(space if space > 0 else room)
        last.append_text(more)
        last.truncate(width)
        return Text("\n").join(lines[: height - 1] + [last])


class AgentPanel(Vertical):
    """Context line, parsed action, feedback, usage, raw reply and (collapsible) prompt."""

    ALLOW_MAXIMIZE = True  # `i` on Play: the whole screen for it (at 80x24 it is hidden until then)

    DEFAULT_CSS = """
    AgentPanel { layout: vertical; }
    AgentPanel #agent-context { height: auto; max-height: 2; }
    AgentPanel #agent-action { height: 2; }
    AgentPanel #agent-feedback { height: 3; }
    AgentPanel.-maximized #agent-action, AgentPanel.-maximized #agent-feedback { height: auto; }
    AgentPanel #agent-warning { height: auto; display: none; color: $text-warning; text-style: bold; }
    AgentPanel #agent-warning.-shown { display: block; }
    AgentPanel #agent-fault { height: auto; max-height: 2; display: none; color: $text-warning; }
    AgentPanel #agent-fault.-shown { display: block; }
    AgentPanel.-maximized #agent-fault { max-height: 100%; }
    AgentPanel #agent-prompt { height: 1fr; overflow-y: scroll; }  /* a bar that never comes and goes: no relayout */
    AgentPanel #agent-reply { height: 5; }
    """

    def __init__(self, *, id: Optional[str] = None, classes: Optional[str] = None) -> None:
        super().__init__(id=id, classes=classes)
        self.shown: Optional[StepView] = None
        self.empty_hint = "No step yet: press n to step, t to type an action."
        self.prompt_lines: list[Text] = []
        self.hint_marked = False
        self.cut_marked = False

    def compose(self) -> ComposeResult:
        yield Static("", id="agent-context")
        yield Static("", id="agent-warning")
        yield ClampedText(id="agent-fault")  # the step's faults (retries and why): on their own line, never cut off
        yield ClampedText(id="agent-action")
        yield ClampedText(id="agent-feedback")
        yield FiguresLine(id="agent-usage")
        yield FiguresLine(id="agent-totals")
        yield SectionTitle("Raw reply", "agent-reply", id="reply-box")
        yield TextView(id="agent-reply")
        yield SectionTitle("Prompt as sent", "agent-prompt", id="prompt-box")
        yield TextView(id="agent-prompt")

    @property
    def prompt_text(self) -> Text:
        """The prompt as shown, as one Text."""
        return Text("\n").join(self.prompt_lines)

    def on_mount(self) -> None:
        self.border_title = "Agent"
        follow(self, self.app.theme_changed_signal, lambda _theme: self._on_theme())

    def on_unmount(self) -> None:
        release(self)  # a signal subscription would keep this widget alive

    def _on_theme(self) -> None:
        if self.shown is not None:  # the verdict's colours are the theme's
            self.show_view(self.shown)
        else:
            self._render_prompt()

    # ----- what the agent carries ---------------------------------------------------------
    def show_context(self, episode: Optional[Episode], summary_label: str = "", context: str = "") -> None:
        """Model, pathway, what it carries; for a fork, the step it branched after and `context` (what it
        sees, as its source or as a person chose: engine.visibility.context_note, gated)."""
        if episode is None:
            self.query_one("#agent-context", Static).update("")
            return
        text = Text()
        text.append(safe(episode.model, one_line=True), style="bold")
        text.append(f" · pathway {episode.pathway}")
        if episode.pathway == "history":
            text.append(f" · history of {len(episode.history_episode_ids)} episode(s)")
            if episode.history_cut:
                text.append(f" · {episode.history_cut} older dropped", style="bold")
        elif episode.pathway == "summary":
            text.append(f" · {safe(summary_label, one_line=True) or 'no summary yet'}")
        if episode.fork_of:
            text.append(f" · fork of {episode.fork_of} after {episode.fork_step} step(s)")
            if context:
                text.append(f" · context: {safe(context, one_line=True)}", style="bold")
        self.query_one("#agent-context", Static).update(safe_text(text, one_line=True))

    def show_warning(self, warning: Optional[str]) -> None:
        """A visible line about the model (e.g. most of its recent replies did not parse), or none."""
        target = self.query_one("#agent-warning", Static)
        target.update(safe_text(f"⚠ {warning}") if warning else "", layout=bool(warning) != target.has_class("-shown"))
        target.set_class(bool(warning), "-shown")

    def show_feedback(self, feedback: str, label: str = "") -> None:
        """The game's agent-visible feedback line; `label` says which step it belongs to."""
        text = Text()
        text.append(f"Feedback{' of ' + label if label else ''} (agent-visible): ", style="bold")
        text.append(safe(feedback, max_chars=2000) or "–")  # gated first: a Text drops BEL and backspace
        self.query_one("#agent-feedback", ClampedText).set_text(safe_text(text, max_chars=2000))

    def show_totals(self, steps: Sequence[Step]) -> None:
        calls = [s for s in steps if s.reply]
        costs = [s.cost for s in calls if s.cost is not None]
        cached = [s.tokens_cached for s in calls if s.tokens_cached is not None]
        parts = usage_parts(f"Totals ({len(calls)} call(s))", sum(s.tokens_in for s in calls),
                            sum(s.tokens_out for s in calls), sum(s.latency_ms for s in calls),
                            sum(costs) if costs else None, sum(cached) if cached else None)
        self.query_one("#agent-totals", FiguresLine).set_parts(parts)

    # ----- one step or proposal -------------------------------------------------------------
    def show_view(self, view: Optional[StepView]) -> None:
        self.shown = view
        action = self.query_one("#agent-action", ClampedText)
        usage = self.query_one("#agent-usage", FiguresLine)
        reply = self.query_one("#agent-reply", TextView)
        if view is None:
            self._show_fault(None)
            action.set_text(Text(self.empty_hint, style="italic"))
            usage.set_parts([])
            reply.show(Text())
            self.query_one("#reply-box", SectionTitle).title = "Raw reply"
            self._render_prompt()
            return
        line = Text()
        line.append(f"{view.title}: ", style="bold")
        line.append(safe(view.action, max_chars=2000) if view.action is not None else "<no parsable answer>",
                    style="bold reverse")
        line.append(f"  by {view.actor}")
        if view.proposed_action is not None:
            line.append(f" (model proposed {safe(view.proposed_action, max_chars=2000)})")
        outside = view.range_note is not None
        if view.reward is None:  # a proposal: nothing to judge against yet
            line.append(" · self-score ")
            line.append_text(self_score_value(self.app, view.self_score, None, outside))
        else:
            kind = verdict(view.self_score, view.reward)
            line.append(" · self-score ")
            line.append_text(self_score_value(self.app, view.self_score, kind, outside))
            line.append(" · reward ")
            line.append_text(judged_value(self.app, view.reward, kind))
            line.append(" ")
            line.append_text(judgement_text(self.app, view.self_score, view.reward, short=True))
        if outside:
            line.append(" · ")
            line.append_text(range_note_text(self.app, view.range_note))
        if view.valid is False:
            line.append(" · invalid action", style="bold")
        action.set_text(safe_text(line, max_chars=2000))
        self._show_fault(view.fault)
        usage.set_parts(usage_parts("Call", view.tokens_in, view.tokens_out, view.latency_ms, view.cost,
                                    view.tokens_cached)
                        if view.reply else ["Call: none (action typed by a person)"])
        body = view.reply or "(no model reply: typed by a person)"
        if len(body) > REPLY_DISPLAY_CAP:
            body = body[:REPLY_DISPLAY_CAP] + f"\n… ({len(view.reply) - REPLY_DISPLAY_CAP:,} more characters stored)"
        reply.show(Text(safe(body, max_chars=None)))  # gated before it is a Text (which drops BEL, backspace)
        self.query_one("#reply-box", SectionTitle).title = f"Raw reply · {view.title}"
        self._render_prompt()

    def _show_fault(self, fault: Optional[str]) -> None:
        """The step's faults (e.g. `timeout: no progress for 120 s; timeout: ...`: the retries its call
        made) on a line of their own above the action, which a long action cannot push out of view."""
        target = self.query_one("#agent-fault", ClampedText)
        target.set_text(safe_text(Text.assemble(("fault: ", "bold"), fault), max_chars=2000) if fault else Text())
        target.set_class(bool(fault), "-shown")

    def _render_prompt(self) -> None:
        if not self.is_mounted:
            return
        box = self.query_one("#prompt-box", SectionTitle)
        target = self.query_one("#agent-prompt", TextView)
        view = self.shown
        if view is None or not view.prompt:
            self.prompt_lines, self.hint_marked, self.cut_marked = [], False, False
            box.title = "Prompt as sent"
            target.show([Text("(no prompt)", style="italic")])
            return
        self.prompt_lines, self.hint_marked, self.cut_marked = format_prompt_lines(view.prompt, self.app)
        marks = []
        if self.hint_marked:
            marks.append("Hint Messages")
        if self.cut_marked:
            marks.append("history cut")
        box.title = (f"Prompt as sent · {view.title} · {len(view.prompt):,} chars"
                     + (f" · marked: {', '.join(marks)}" if marks else ""))
        target.show(self.prompt_lines)
