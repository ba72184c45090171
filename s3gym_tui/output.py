"""Writing an output file (an export, a dataset, metadata) without ever harming the store: the
database and its -wal/-shm/-journal are refused as targets, and the file is written whole to a
temporary name and renamed, so a full disk or an error leaves the old file (or none) in place."""

from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Optional, TextIO

DB_COMPANIONS = ("", "-wal", "-shm", "-journal")


class OutputError(ValueError):
    """The output cannot be written there; one line, nothing written."""


def _same(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve() or (a.exists() and b.exists() and os.path.samefile(a, b))
    except (OSError, ValueError):
        return False


def check_target(path: Path, db_path: Optional[Path]) -> Path:
    """The output path, or OutputError when it is a directory, has no parent directory, or is the
    database (or one of its companion files)."""
    path = Path(path).expanduser()
    if path.is_dir():
        raise OutputError(f"{path} is a directory: give a file name (nothing was written)")
    if not path.parent.is_dir():
        raise OutputError(f"no directory {path.parent} for {path.name} (nothing was written)")
    if db_path is not None:
        for suffix in DB_COMPANIONS:
            if _same(path, Path(str(db_path) + suffix)):
                raise OutputError(f"{path} is the database{' ' + suffix[1:] + ' file' if suffix else ''}"
                                  f" ({db_path}): choose another output file (nothing was written)")
    return path


@contextmanager
def atomic_path(path: Path, suffix: str = ".part") -> Iterator[str]:
    """A temporary file name beside `path` for a writer that takes a path: renamed to `path` when the
    block ends, removed on any error (an OSError becomes one OutputError line; nothing is written)."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix, dir=path.parent)
        os.close(fd)
    except OSError as err:
        raise OutputError(f"cannot write in {path.parent}: {err.strerror or err} (nothing was written)") from err
    try:
        yield tmp
        os.replace(tmp, path)
    except OSError as err:
        _remove(tmp)
        raise OutputError(f"cannot write {path}: {err.strerror or err} (nothing was written)") from err
    except BaseException:
        _remove(tmp)
        raise


@contextmanager
def atomic_text(path: Path, db_path: Optional[Path] = None) -> Iterator[TextIO]:
    """Write `path` as UTF-8 text, all or nothing."""
    path = check_target(path, db_path)
    with atomic_path(path) as tmp:
        with open(tmp, "w", encoding="utf-8") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())


def _remove(tmp: str) -> None:
    try:
        os.unlink(tmp)
    except OSError:
        pass
