"""The gate for untrusted text (s3gym_tui.textgate): what it changes, what it keeps, its bounds, its
Rich Text and JSON forms, and the Console that gates what reaches it; every hostile string of the
corpus (tests/hostile.py) comes out with no control, bidi or invisible character left."""

from __future__ import annotations

import io
import json
import unicodedata

import pytest
from rich.table import Table
from rich.text import Text

from s3gym_tui.textgate import (STRICT_ENV, GatedConsole, is_safe, safe, safe_json, safe_markup, safe_text)
from tests.hostile import CORPUS

# Characters that must never come out of the gate (an independent list: the categories, not the gate's regex)
def leftover(text: str) -> list[str]:
    bad = []
    for ch in text:
        category = unicodedata.category(ch)
        if ch != "\n" and category in ("Cc", "Cf", "Cs", "Zl", "Zp"):
            bad.append(ch)
        elif 0xE0000 <= ord(ch) <= 0xE01EF or 0xFE00 <= ord(ch) <= 0xFE0E:  # tags, variation selectors
            bad.append(ch)
    return bad


@pytest.mark.parametrize("name", list(CORPUS))
def test_every_corpus_string_comes_out_with_nothing_a_terminal_acts_on(name):
    text = CORPUS[name]
    for shown in (safe(text, max_chars=None), safe(text, one_line=True, max_chars=None),
                  safe_text(text, max_chars=None).plain, safe_markup(text, max_chars=None)):
        assert leftover(shown) == [], (name, shown[:200])
        assert is_safe(shown)
    assert "\n" not in safe(text, one_line=True, max_chars=None)


def test_controls_become_pictures_and_escapes_and_plain_text_is_untouched():
    assert safe("\x1b]0;pwned\x07") == "␛]0;pwned␇"
    assert safe("a\x00b\x7fc") == "a␀b␡c"
    assert safe("\x9b2J\x9d0;t\x9c") == "\\x9b2J\\x9d0;t\\x9c"
    assert safe("abc\u202edcba") == "abc\\u202edcba"
    assert safe("tag\U000e0041") == "tag\\U000e0041"
    assert safe("zero\u200bwidth") == "zero\\u200bwidth"
    assert safe("harmless\rEVIL") == "harmless␍EVIL"  # an overwrite shows as what it is
    assert safe("line one\r\nline two") == "line one\nline two"  # CRLF is a line break
    assert safe("a\tb") == "a    b" and safe("a\tb", one_line=True) == "a b"
    plain = "Answer: collaborate, Score: 2 — ünïcödé 漢字 ♟ ●"
    assert safe(plain) == plain and is_safe(plain)
    assert safe("☂\ufe0f") == "☂\ufe0f"  # VS16 (emoji presentation) is kept
    assert safe(None) == "" and safe(12) == "12"


def test_one_line_and_the_bounds_say_what_was_left_out():
    assert safe("a\nb\nc", one_line=True) == "a⏎b⏎c"
    assert safe("x" * 10, max_chars=4) == "xxxx… [6 more characters]"
    assert safe("\n".join("abcdef"), max_lines=2) == "a\nb\n… [4 more lines]"
    assert safe("a\nb", max_lines=2) == "a\nb"
    assert safe("a\nb\nc", max_lines=1, one_line=True) == "a⏎b⏎c"  # one line: no line bound
    long = safe("y" * 300_000)
    assert len(long) < 201_000 and long.endswith("… [100,000 more characters]")


def test_safe_is_idempotent_and_is_safe_agrees():
    for text in CORPUS.values():
        once = safe(text, max_chars=None)
        assert safe(once, max_chars=None) == once
        assert is_safe(once) and (is_safe(text) == (once == text))


def test_markup_is_shown_not_read():
    shown = Text.from_markup(f"[bold]{safe_markup(CORPUS['rich-markup'])}[/bold]")
    assert "[@click=app.quit]" in shown.plain and "[link=" in shown.plain
    assert Text.from_markup(f"[b]{safe_markup('ends with a backslash ' + chr(92))}[/b]").plain.endswith("\\")


def test_safe_text_keeps_styles_on_what_it_replaced():
    text = Text("ok ")
    text.append("\x1b[2J bad", style="bold red")
    text.append(" end", style="italic")
    gated = safe_text(text)
    assert gated.plain == "ok ␛[2J bad end"
    assert gated.get_style_at_offset(_console(), 3).bold  # the picture carries the span's style
    assert gated.get_style_at_offset(_console(), len("ok ␛[2J b")).color.name == "red"
    assert gated.get_style_at_offset(_console(), len(gated.plain) - 1).italic
    same = Text("nothing to do", style="green")
    assert safe_text(same) is same
    assert safe_text("[b]markup is text[/b]").plain == "[b]markup is text[/b]"
    assert safe_text("a\nb", one_line=True).plain == "a⏎b"
    assert safe_text(Text("x" * 50), max_chars=10).plain == "x" * 10 + "… [40 more characters]"


def _console():
    return GatedConsole(file=io.StringIO(), width=80)


def test_safe_json_is_the_same_value_with_nothing_raw():
    value = {"action": CORPUS["report-payload"] + CORPUS["c1-csi"] + CORPUS["bidi-rlo"] + CORPUS["tag-chars"],
             "lines": CORPUS["many-lines"][:50], "plain": "ünïcödé"}
    text = safe_json(json.dumps(value, ensure_ascii=False, indent=2))
    assert json.loads(text) == value
    assert leftover(text.replace("\n", "")) == []
    assert "ünïcödé" in text and "\\u009b" in text and "\\u202e" in text and "\\udb40\\udc41" in text


def test_the_console_gates_what_its_sources_missed_and_strict_mode_refuses(monkeypatch):
    out = io.StringIO()
    console = GatedConsole(file=out, width=120, force_terminal=True, color_system="standard")
    table = Table("raw cell")
    table.add_row(Text(CORPUS["report-payload"]))  # a source that forgot the gate
    console.print(table)
    console.print(Text("title: " + CORPUS["osc2-st"]), style="bold")
    written = out.getvalue()
    assert "\x1b]" not in written and "\x07" not in written and "␛]0;pwned" in written
    assert "\x1b[1m" in written  # its own colours still reach the terminal
    monkeypatch.setenv(STRICT_ENV, "1")
    with pytest.raises(AssertionError, match="without the gate"):
        console.print(Text(CORPUS["osc52-st"]))
    console.print(safe_text(CORPUS["osc52-st"]))  # a gated source passes in strict mode too


def test_every_control_format_and_separator_character_of_unicode_is_changed():
    """Every character Unicode classes as a control, a format character (bidi, zero-width, tags...),
    a line or paragraph separator or a surrogate (this Python's Unicode database) is made visible."""
    kept = [hex(code) for code in range(0x110000)
            if chr(code) != "\n" and unicodedata.category(chr(code)) in ("Cc", "Cf", "Zl", "Zp", "Cs")
            and is_safe(chr(code))]
    assert kept == []


def test_the_fast_check_agrees_with_the_full_one_on_every_character():
    """is_safe checks str.isprintable() and a short list first: that list must be exactly the unsafe
    characters isprintable() accepts, or the fast path would let one through."""
    from s3gym_tui import textgate

    for code in range(0x110000):
        ch = chr(code)
        full = textgate._UNSAFE.search(ch) is None
        assert is_safe(ch) == full and is_safe("abc" + ch + "é") == full, hex(code)
