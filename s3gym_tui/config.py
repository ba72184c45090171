"""User settings: defaults < config file (TOML) < environment (S3GYM_*). Malformed files fail clearly."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError


class ConfigError(ValueError):
    """The config file cannot be used (one-line message naming the file and the problem)."""


class Settings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    default_model: str = "local/smollm2-135m"
    db: Optional[Path] = None
    theme: Literal["dark", "light"] = "dark"
    propose_then_wait: bool = False  # the agent proposes; a person confirms, edits or vetoes
    keymap: dict[str, str] = Field(default_factory=dict)  # binding id -> key(s), e.g. {"step": "n"}
    human_name: str = Field(default_factory=lambda: os.environ.get("USER", "human"))


def config_path() -> Path:
    env = os.environ.get("S3GYM_CONFIG")
    if env:
        return Path(env)
    from platformdirs import user_config_dir

    return Path(user_config_dir("s3gym")) / "config.toml"


def load_settings(path: Optional[Path] = None) -> Settings:
    """Read the config file if present, then S3GYM_MODEL / S3GYM_DB / S3GYM_THEME overrides."""
    path = path or config_path()
    data: dict = {}
    if path.exists():
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise ConfigError(f"config file {path} is not valid TOML: {exc}") from exc
        except OSError as exc:
            raise ConfigError(f"config file {path} cannot be read: {exc.strerror}") from exc
    env = {"default_model": "S3GYM_MODEL", "db": "S3GYM_DB", "theme": "S3GYM_THEME"}
    for key, var in env.items():
        if os.environ.get(var):
            data[key] = os.environ[var]
    try:
        return Settings(**data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or "settings"
        raise ConfigError(f"config file {path}: {where}: {first.get('msg')}") from exc
