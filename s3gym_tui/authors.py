"""Who wrote or curated a summary, in one format: 'human:<name>' or 'model:<model>'.

summaries.author and summary_actions.author hold these. Rows stored before the format was enforced
may say just 'human' or 'model' (or 'human:human' when $USER was unset); they stay as stored and
read as their kind with the name unknown."""

from __future__ import annotations

import getpass
from typing import Optional

KINDS = ("human", "model")


def human_author(name: str) -> str:
    """'human:<name>' (the configured human_name, by default the login name)."""
    return f"human:{name}"


def model_author(model: str) -> str:
    """'model:<model>' (the litellm model string)."""
    return f"model:{model}"


def author_kind(author: str) -> Optional[str]:
    """'human' or 'model' (old rows included), None for anything else."""
    kind = author.split(":", 1)[0]
    return kind if kind in KINDS else None


def author_problem(author: str) -> Optional[str]:
    """Why `author` is not in the format (None when it is)."""
    kind, sep, name = author.partition(":")
    if kind not in KINDS or not sep or not name.strip():
        return f"author {author!r} is not 'human:<name>' or 'model:<model>'"
    return None


def login_name() -> str:
    """The person's login name ($LOGNAME, $USER, ... or the account's), 'unknown' when none."""
    try:
        name = getpass.getuser().strip()
    except (KeyError, OSError, ImportError):  # no such variable and no account entry
        name = ""
    return name or "unknown"
