"""Keeping credentials out of everything stored, exported or shown: the values of the secret
environment variables that are set (API keys, tokens), and credentials inside URLs; and out of the
command lines of the processes s3gym starts (any local user can read those), which get them through
their environment instead (readable by their own user only)."""

from __future__ import annotations

import json
import os
import re
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

REDACTED = "[redacted]"
# Environment variables whose values are secrets (API keys, tokens, passwords).
SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?)$|API_?KEY|^AWS_",
                         re.IGNORECASE)
MIN_SECRET_CHARS = 8  # shorter values are not credentials and would redact ordinary words
# What a parent s3gym passes its child processes: a JSON list of the URLs (api bases) whose credentials
# were taken off the child's command line (see split_url_credentials, with_credentials).
CREDENTIALS_ENV = "S3GYM_API_CREDENTIALS"
_SECRET_QUERY = re.compile(r"key|token|secret|password|passwd|auth|sig|credential", re.IGNORECASE)


_SEEN: list = [None, []]  # (the environment's items when last read, its secret values)


def secret_values() -> list[str]:
    """The values of the secret-looking environment variables that are set, longest first. Read
    again whenever the environment changed (a snapshot of its raw items is compared: the scan with
    a pattern per name costs more than the compare, and it runs several times a step)."""
    raw = getattr(os.environ, "_data", None)
    snapshot = tuple(raw.items()) if isinstance(raw, dict) else None
    if snapshot is not None and snapshot == _SEEN[0]:
        return list(_SEEN[1])
    values = {value for name, value in os.environ.items()
              if len(value) >= MIN_SECRET_CHARS and SECRET_NAME.search(name)}
    ordered = sorted(values, key=len, reverse=True)
    _SEEN[:] = [snapshot, ordered]
    return list(ordered)


def redact_values(text: str, values: list[str] | None = None) -> str:
    """`text` with every secret value (see secret_values) replaced by [redacted]."""
    if not text:
        return text
    for value in secret_values() if values is None else values:
        if value in text:
            text = text.replace(value, REDACTED)
    return text


def has_secret(text: str) -> bool:
    return bool(text) and any(value in text for value in secret_values())


def strip_url_credentials(url: str | None) -> str | None:
    """The URL without a user:password part and with secret-looking query parameters redacted
    (http://u:KEY@host/v1?api-key=KEY -> http://host/v1?api-key=[redacted])."""
    if not url:
        return url
    try:
        parts = urlsplit(url)
    except ValueError:
        return redact_values(url)
    netloc = parts.netloc.rsplit("@", 1)[-1] if "@" in parts.netloc else parts.netloc
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        query = urlencode([(k, REDACTED if _SECRET_QUERY.search(k) else v) for k, v in pairs],
                          safe="[]")
    return redact_values(urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment)))


def split_url_credentials(argv: list[str]) -> tuple[list[str], list[str]]:
    """`argv` with every URL in it credential-free (strip_url_credentials), and the URLs that had
    credentials, as they were (to pass in the environment: credentials_env)."""
    shown, taken = [], []
    for arg in argv:
        clean = strip_url_credentials(arg) if "://" in arg else arg
        if clean != arg:
            taken.append(arg)
        shown.append(clean)
    return shown, taken


def credentials_env(urls) -> dict[str, str]:
    """The environment entry that hands `urls` (with their credentials) to a child process."""
    urls = sorted(set(urls))
    return {CREDENTIALS_ENV: json.dumps(urls)} if urls else {}


def with_credentials(url: str | None) -> str | None:
    """`url` with the credentials a parent process passed in $S3GYM_API_CREDENTIALS: the URL there
    whose credential-free form is `url`; else `url` as it is."""
    raw = os.environ.get(CREDENTIALS_ENV)
    if not url or not raw:
        return url
    try:
        known = json.loads(raw)
    except ValueError:
        return url
    for full in known if isinstance(known, list) else ():
        if isinstance(full, str) and full != url and strip_url_credentials(full) == url:
            return full
    return url
