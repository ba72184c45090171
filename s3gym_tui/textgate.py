"""The one gate for untrusted text before it reaches a terminal: model replies, provider errors,
stored text, summaries, actions, file names, environment values.

Markup escaping is not enough: an ESC or an 8-bit C1 byte starts a terminal control sequence
(OSC 0/2 set the title, OSC 52 writes the clipboard, CSI erases the screen and moves the cursor),
`\\r` lets a line overwrite itself, and bidi overrides or zero-width characters make text read
differently from what it is. Everything here is shown visibly instead:

- C0 controls and DEL become their Control Pictures (ESC -> ␛, BEL -> ␇, NUL -> ␀, CR -> ␍);
  `\\n` stays a line break (when lines are kept) and a tab becomes spaces;
- C1 controls (U+0080..U+009F), bidi embeddings, overrides and isolates, zero-width and other
  invisible format characters, line/paragraph separators, Unicode tag characters and lone
  surrogates become a visible escape such as `\\x9b` or `\\u202e`;
- the text is bounded for display (characters and lines), with the cut said in the text.

Stored text stays exact: the gate is applied where text is shown, never where it is stored.
`safe` gives plain text (for a Rich `Text`, Textual `Content` or a plain `print`), `safe_markup`
the same with Rich/Textual markup escaped, for the places that build markup strings.
"""

from __future__ import annotations

import re
from typing import Optional

# Characters that must not reach a terminal as they are.
_UNSAFE = re.compile(
    "[\x00-\x09\x0b-\x1f\x7f-\x9f"  # C0 (but \n), DEL, C1
    "\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f"  # soft hyphen, invisible fillers, Mongolian FVS
    "\u200b-\u200f\u2028-\u202e\u2060-\u206f"  # zero-width, LRM/RLM, separators, bidi, invisible operators
    "\u3164\ufe00-\ufe0e\ufeff\uffa0\ufff0-\ufffb"  # fillers, variation selectors but VS16 (emoji), BOM
    "\U000e0000-\U000e007f"  # tag characters (invisible ASCII smuggling)
    "\ud800-\udfff]"  # lone surrogates (not encodable)
)
_PICTURES = {code: chr(0x2400 + code) for code in range(0x20)}
_PICTURES[0x7F] = "\u2421"  # ␡
TAB = "    "
# A display bound is generous; the caller passes a tighter one where a widget needs it.
DEFAULT_MAX_CHARS = 200_000


def _visible(match: re.Match) -> str:
    char = match.group(0)
    code = ord(char)
    if code == 0x09:
        return TAB
    if code in _PICTURES:
        return _PICTURES[code]
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def _visible_one_line(match: re.Match) -> str:
    return " " if match.group(0) == "\t" else _visible(match)


def safe(text: object, *, max_chars: Optional[int] = DEFAULT_MAX_CHARS, max_lines: Optional[int] = None,
         one_line: bool = False) -> str:
    """`text` made harmless for a terminal (see the module docstring).

    `one_line=True` shows line breaks as `⏎` (for a table cell or a progress line), `max_lines`
    keeps the first lines and says how many were left out, `max_chars` bounds the length and
    says how many characters were left out. None or a non-string becomes its `str()`."""
    if text is None:
        return ""
    if not isinstance(text, str):
        text = str(text)
    if "\r" in text:
        text = text.replace("\r\n", "\n")
    cut_lines = 0
    if max_lines is not None and not one_line:
        lines = text.split("\n")
        if len(lines) > max_lines:
            cut_lines = len(lines) - max_lines
            text = "\n".join(lines[:max(max_lines, 0)])
    cut_chars = 0
    if max_chars is not None and len(text) > max_chars:
        cut_chars = len(text) - max_chars
        text = text[:max(max_chars, 0)]
    if one_line:
        text = _UNSAFE.sub(_visible_one_line, text).replace("\n", "⏎")
    else:
        text = _UNSAFE.sub(_visible, text)
    if cut_chars:
        text += f"… [{cut_chars:,} more characters]"
    if cut_lines:
        text += f"\n… [{cut_lines:,} more lines]"
    return text


def safe_markup(text: object, **bounds) -> str:
    """`safe(text)` with Rich and Textual markup escaped, to put inside a markup string."""
    from rich.markup import escape

    return escape(safe(text, **bounds))


def is_safe(text: str) -> bool:
    """Whether `text` would pass the gate unchanged (no control, bidi or invisible character)."""
    return _UNSAFE.search(text.replace("\t", " ").replace("\r\n", "\n")) is None
