"""The one gate for untrusted text before it reaches a terminal: model replies, provider errors,
stored text, summaries, actions, file names, environment values.

Markup escaping is not enough: an ESC or an 8-bit C1 byte starts a terminal control sequence
(OSC 0/2 set the title, OSC 52 writes the clipboard, CSI erases the screen and moves the cursor),
`\\r` lets a line overwrite itself, and bidi overrides or zero-width characters make text read
differently from what it is. Everything here is shown visibly instead:

- C0 controls and DEL become their Control Pictures (ESC -> ␛, BEL -> ␇, NUL -> ␀, CR -> ␍);
  `\\n` stays a line break (when lines are kept) and a tab becomes spaces;
- C1 controls (U+0080..U+009F), bidi embeddings, overrides and isolates, zero-width and other
  invisible format characters, line/paragraph separators, Unicode tag characters, variation
  selectors used to smuggle bytes, and lone surrogates become a visible escape such as `\\x9b`,
  `\\u202e` or `\\U000e0041`;
- the text is bounded for display (characters and lines), with the cut said in the text.

Stored text stays exact: the gate is applied where text is shown, never where it is stored.

- `safe` gives plain text (for a Rich `Text`, a Textual `Content` or a plain `print`);
- `safe_text` gives a Rich `Text` (from a string, or from a styled `Text` whose styles it keeps);
- `safe_markup` gives `safe` with Rich markup escaped, for the CLI's markup strings (Textual's
  markup reads more tags than Rich's escape knows: widgets take `safe_text`, never markup);
- `safe_json` writes every character the gate would change in a JSON text as a `\\u` escape (the
  same JSON value, nothing raw on a terminal);
- `GatedConsole` is a Rich Console that passes every text segment it renders through the gate: the
  CLI's last line of defence behind the gates at the sources (which keep the layout right).
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Optional

from rich.console import Console
from rich.segment import Segment

if TYPE_CHECKING:
    from rich.text import Text

# Characters that must not reach a terminal as they are: C0 (but \n), and the rest.
_C0 = "\x00-\x09\x0b-\x1f"
_OTHER = (
    "\x7f-\x9f"  # DEL, C1
    "\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f"  # soft hyphen, invisible fillers, Mongolian FVS
    "\u200b-\u200f\u2028-\u202e\u2060-\u206f"  # zero-width, LRM/RLM, separators, bidi, invisible operators
    "\u3164\ufe00-\ufe0e\ufeff\uffa0\ufff0-\ufffb"  # fillers, variation selectors but VS16 (emoji), BOM
    "\u0600-\u0605\u06dd\u070f\u0890\u0891\u08e2"  # prepended concatenation marks (format characters)
    "\U000110bd\U000110cd\U00013430-\U0001343f"  # Kaithi number signs, Egyptian format controls
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"  # shorthand and musical format controls
    "\U000e0000-\U000e007f\U000e0100-\U000e01ef"  # tag characters, variation selectors 17-256 (smuggling)
    "\ud800-\udfff"  # lone surrogates (not encodable)
)
_UNSAFE = re.compile(f"[{_C0}{_OTHER}]")
_UNSAFE_OR_NEWLINE = re.compile(f"[{_C0}{_OTHER}\n]")
_JSON_UNSAFE = re.compile(f"[{_OTHER}]")  # json.dumps escapes C0 itself; raw \n and \t are layout
# The few unsafe characters str.isprintable() accepts (combining joiners and selectors, fillers): with
# isprintable() first, a text is checked against these alone (the full class costs ~90 ns a character).
_PRINTABLE_UNSAFE = re.compile("[\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180d\u180f\u3164\ufe00-\ufe0e\uffa0"
                               "\U000e0100-\U000e01ef]")
_PICTURES = {code: chr(0x2400 + code) for code in range(0x20)}
_PICTURES[0x7F] = "\u2421"  # ␡
TAB = "    "
NEWLINE = "⏎"  # a line break in one-line text
# A display bound is generous; the caller passes a tighter one where a widget needs it.
DEFAULT_MAX_CHARS = 200_000
STRICT_ENV = "S3GYM_TEXTGATE_STRICT"  # set (tests): GatedConsole refuses unsafe text instead of gating it


def _visible(char: str, one_line: bool = False) -> str:
    code = ord(char)
    if code == 0x09:
        return " " if one_line else TAB
    if code == 0x0A:
        return NEWLINE
    if code in _PICTURES:
        return _PICTURES[code]
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def _multi(match: re.Match) -> str:
    return _visible(match.group(0))


def _one(match: re.Match) -> str:
    return _visible(match.group(0), one_line=True)


def _clean(text: str, one_line: bool = False) -> bool:
    """Whether the gate leaves `text` as it is (the fast checks first; a \n is kept unless one_line)."""
    if text.isprintable():  # no control, format, separator or surrogate character, no \n or \t
        return text.isascii() or _PRINTABLE_UNSAFE.search(text) is None
    return (_UNSAFE_OR_NEWLINE if one_line else _UNSAFE).search(text) is None


def safe(text: object, *, max_chars: Optional[int] = DEFAULT_MAX_CHARS, max_lines: Optional[int] = None,
         one_line: bool = False) -> str:
    """`text` made harmless for a terminal (see the module docstring).

    `one_line=True` shows line breaks as `⏎` (for a table cell or a progress line), `max_lines`
    keeps the first lines and says how many were left out, `max_chars` bounds the length (of the
    text before its controls are made visible) and says how many characters were left out. None or
    a non-string becomes its `str()`."""
    if text is None:
        return ""
    if not isinstance(text, str):
        text = str(text)
    if "\r" in text:
        text = text.replace("\r\n", "\n")
    cut_lines = 0
    if max_lines is not None and not one_line and text.count("\n") >= max_lines:
        lines = text.split("\n")
        cut_lines = len(lines) - max_lines
        text = "\n".join(lines[:max(max_lines, 0)])
    cut_chars = 0
    if max_chars is not None and len(text) > max_chars:
        cut_chars = len(text) - max_chars
        text = text[:max(max_chars, 0)]
    if not _clean(text, one_line):
        text = _UNSAFE_OR_NEWLINE.sub(_one, text) if one_line else _UNSAFE.sub(_multi, text)
    if cut_chars:
        text += f"… [{cut_chars:,} more characters]"
    if cut_lines:
        text += f"{' ' if one_line else chr(10)}… [{cut_lines:,} more lines]"
    return text


def is_safe(text: str, one_line: bool = False) -> bool:
    """Whether `text` would pass the gate unchanged (no control, bidi or invisible character; with
    `one_line`, no line break either). Tabs and CRLF count as changes too."""
    return _clean(text, one_line)


def safe_markup(text: object, **bounds) -> str:
    """`safe(text)` with Rich markup escaped, to put inside a Rich markup string (the CLI)."""
    from rich.markup import escape

    return escape(safe(text, **bounds))


def safe_text(value: "str | Text | None", style: str = "", *, max_chars: Optional[int] = DEFAULT_MAX_CHARS,
              max_lines: Optional[int] = None, one_line: bool = False) -> "Text":
    """A Rich `Text` a widget can show: a string through `safe` (no markup is read), or a styled
    `Text` with its unsafe characters made visible and its styles kept on what replaced them."""
    from rich.text import Text

    if not isinstance(value, Text):
        return Text(safe(value, max_chars=max_chars, max_lines=max_lines, one_line=one_line), style=style)
    if max_chars is not None and len(value) > max_chars:
        cut = len(value) - max_chars
        value = value[:max_chars]
        value.append(f"… [{cut:,} more characters]")
    if max_lines is not None and not one_line and value.plain.count("\n") >= max_lines:
        lines = value.split("\n", allow_blank=True)
        value = Text("\n").join(lines[:max_lines])
        value.append(f"\n… [{len(lines) - max_lines:,} more lines]")
    plain = value.plain
    pattern = _UNSAFE_OR_NEWLINE if one_line else _UNSAFE
    if _clean(plain, one_line):
        if style:
            value = value.copy()
            value.stylize(style)
        return value
    gated = value.blank_copy()
    last = 0
    for match in pattern.finditer(value.plain):
        start = match.start()
        gated.append_text(value[last:start])
        piece = Text(_visible(match.group(0), one_line))
        for span in value[start:start + 1].spans:
            piece.stylize(span.style)
        gated.append_text(piece)
        last = start + 1
    gated.append_text(value[last:])
    if style:
        gated.stylize(style)
    return gated


def safe_json(text: str) -> str:
    """A JSON text with every character the gate would change written as a `\\u` escape (astral ones
    as surrogate pairs): the same JSON value when parsed, nothing raw when printed."""
    if _clean(text):
        return text

    def escaped(match: re.Match) -> str:
        code = ord(match.group(0))
        if code > 0xFFFF:
            code -= 0x10000
            return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
        return f"\\u{code:04x}"

    return _JSON_UNSAFE.sub(escaped, text)


class GatedConsole(Console):
    """A Rich Console whose text segments pass the gate as they are rendered: control segments (Rich's
    own cursor moves and erases) go through, any text that would drive the terminal is shown visibly.
    The sources gate their text first, so the layout is right; this catches what they missed. With
    $S3GYM_TEXTGATE_STRICT set (the tests) such text raises instead, so a missed source shows."""

    def render(self, renderable, options=None):
        strict = bool(os.environ.get(STRICT_ENV))
        for segment in super().render(renderable, options):
            text = segment.text
            if segment.control is None and text and not is_safe(text):
                if strict:
                    raise AssertionError(f"text reached the console without the gate: {text[:200]!r}")
                segment = Segment(safe(text, max_chars=None), segment.style)
            yield segment
