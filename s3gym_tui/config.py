"""User settings: defaults < config file (TOML) < environment (S3GYM_*). Malformed files fail clearly."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError, field_validator

from s3gym_tui.authors import login_name
from s3gym_tui.models import INT64_MAX


MAX_SWEEP_WORKERS = 64  # worker processes a sweep may use (engine.sweep_workers)


class ConfigError(ValueError):
    """The config file cannot be used (one-line message naming the file and the problem)."""


class ModelSettings(BaseModel):
    """One model's call settings; unset fields fall back to the engine's defaults."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    api_base: Optional[str] = None  # e.g. http://127.0.0.1:11434 for Ollama
    max_tokens: Optional[int] = Field(None, ge=1, le=INT64_MAX)
    timeout_s: Optional[float] = Field(None, gt=0)  # seconds a call may show no progress before a retry
    decoding: Optional[Literal["free", "grammar"]] = None  # constrained decoding (engine.decoding)
    model_args: dict[str, Any] = Field(default_factory=dict)  # provider arguments passed through litellm


class Settings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    default_model: str = "local/smollm2-135m"
    db: Optional[Path] = None
    theme: Literal["dark", "light"] = "dark"
    propose_then_wait: bool = False  # the agent proposes; a person confirms, edits or vetoes
    keymap: dict[str, str] = Field(default_factory=dict)  # binding id -> key(s), e.g. {"step": "n"}
    # who curates summaries, recorded as human:<name> (default: the login name, $USER)
    human_name: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)] = Field(
        default_factory=login_name)
    # labels of annotations beyond the defaults (models.DEFAULT_LABELS): labels = ["blunder", "pretty"]
    labels: tuple[Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=40,
                                                   pattern=r"^[\w?!.+-]+$")], ...] = ()
    # per model string: [models."ollama_chat/llama3.2"] api_base = "...", max_tokens = ..., timeout_s = ...
    models: dict[str, ModelSettings] = Field(default_factory=dict)
    # model servers to look for besides the usual local ports (engine.discovery): a port on this
    # machine ("8765"), host:port or a URL: servers = ["8765", "http://gpu1:8000/v1"]; $S3GYM_SERVERS
    # (comma-separated) replaces them
    servers: tuple[str, ...] = ()
    # processes driving a sweep's runs (`s3gym sweep --workers`): 1 is this process alone; more, when one
    # core cannot keep the model servers busy (docs/sweeps-and-clusters.md)
    sweep_workers: int = Field(1, ge=1, le=MAX_SWEEP_WORKERS)

    @field_validator("servers", mode="before")
    @classmethod
    def _server_list(cls, value: Any) -> Any:
        from s3gym_tui.engine.discovery import parse_server

        items = [part for part in value.split(",")] if isinstance(value, str) else value
        if not isinstance(items, (list, tuple)):
            return value
        out = tuple(str(item).strip() for item in items if str(item).strip())
        for item in out:
            parse_server(item)  # ValueError: one line naming it
        return out

    def annotation_labels(self) -> tuple[str, ...]:
        """The labels an annotation may carry: the defaults, then the config's own."""
        from s3gym_tui.models import DEFAULT_LABELS

        return tuple(dict.fromkeys((*DEFAULT_LABELS, *self.labels)))

    def model_settings(self, model: str) -> ModelSettings:
        """The settings for `model` (all unset when the config names none)."""
        return self.models.get(model) or ModelSettings()

    def with_model_settings(self, model: str, own: ModelSettings) -> "Settings":
        """A copy with `model`'s settings replaced (empty settings remove the entry)."""
        models = dict(self.models)
        if own == ModelSettings():
            models.pop(model, None)
        else:
            models[model] = own
        return self.model_copy(update={"models": models})


def config_path() -> Path:
    env = os.environ.get("S3GYM_CONFIG")
    if env:
        return Path(env)
    from platformdirs import user_config_dir

    return Path(user_config_dir("s3gym")) / "config.toml"


def load_settings(path: Optional[Path] = None) -> Settings:
    """Read the config file if present, then S3GYM_MODEL / S3GYM_DB / S3GYM_THEME / S3GYM_SERVERS overrides."""
    path = path or config_path()
    data: dict = {}
    if path.exists():
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise ConfigError(f"config file {path} is not valid TOML: {exc}") from exc
        except OSError as exc:
            raise ConfigError(f"config file {path} cannot be read: {exc.strerror}") from exc
    env = {"default_model": "S3GYM_MODEL", "db": "S3GYM_DB", "theme": "S3GYM_THEME", "servers": "S3GYM_SERVERS"}
    for key, var in env.items():
        if os.environ.get(var):
            data[key] = os.environ[var]
    try:
        return Settings(**data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or "settings"
        message = str(first.get("msg")).removeprefix("Value error, ")
        if where.split(".")[0] in env and os.environ.get(env[where.split(".")[0]]):
            raise ConfigError(f"{env[where.split('.')[0]]}: {message}") from exc
        raise ConfigError(f"config file {path}: {where}: {message}") from exc


def save_model_settings(model: str, own: ModelSettings, path: Optional[Path] = None) -> Path:
    """Write `model`'s settings into the config file's [models."<model>"] table, keeping the rest
    of the file (comments, order) as it is (tomlkit); an empty `own` removes the table."""
    import tomlkit

    path = path or config_path()
    try:
        document = tomlkit.parse(path.read_text(encoding="utf-8")) if path.exists() else tomlkit.document()
    except (tomlkit.exceptions.TOMLKitError, UnicodeDecodeError) as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from exc
    except OSError as exc:
        raise ConfigError(f"config file {path} cannot be read: {exc.strerror}") from exc
    models = document.get("models")
    if models is None:
        models = tomlkit.table(is_super_table=True)
        document["models"] = models
    values = {k: v for k, v in own.model_dump().items() if v is not None and v != {}}
    if values:
        table = tomlkit.table()
        for key, value in values.items():
            table[key] = value
        models[model] = table
    elif model in models:
        del models[model]
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(tomlkit.dumps(document), encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"config file {path} cannot be written: {exc.strerror}") from exc
    return path
