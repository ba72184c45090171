"""The command-line options of `s3gym train` and `s3gym distill`, generated from the recipe models
(training/config.py: each field's flag, help text, allowed values and default), so a setting added to a
model appears in --help and is validated once, by the model. Every generated option defaults to None
(not given): the recipe's own default applies, a recipe file (`--config`) or a stored training (`--from`)
can set it, and a flag that was given overrides both."""

from __future__ import annotations

import functools
import inspect
import typing
from typing import Any, Callable, Optional

import typer

from s3gym_tui.training.config import RECIPES, TrainerSettings


def _choices(annotation: Any) -> Optional[tuple[str, ...]]:
    """The allowed values of a Literal field (also inside Optional), else None."""
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) is typing.Literal:
        return tuple(str(a) for a in args)
    for arg in args:
        found = _choices(arg)
        if found:
            return found
    return None


def _kind(annotation: Any) -> type:
    """The CLI type of a field: bool, int, float or str (lists and Literals are read as text)."""
    for candidate in (bool, int, float):
        if annotation is candidate or candidate in typing.get_args(annotation):
            if not _choices(annotation):
                return candidate
    return str


def _default_text(name: str, classes: tuple[type[TrainerSettings], ...]) -> str:
    """`default: 16` or `default: 5e-4 (sft), 1e-4 (grpo, taspo)` from the models' own defaults."""
    found: dict[str, list[str]] = {}
    for cls in classes:
        field = cls.model_fields.get(name)
        if field is None:
            continue
        value = field.default
        text = "none" if value is None else (",".join(value) if isinstance(value, list) else f"{value:g}"
                                              if isinstance(value, float) else str(value).lower()
                                              if isinstance(value, bool) else str(value))
        found.setdefault(text, []).append(cls.method)
    if len(found) == 1:
        return f"default: {next(iter(found))}"
    return "default: " + ", ".join(f"{text} ({', '.join(methods)})" for text, methods in found.items())


def recipe_parameters(classes: tuple[type[TrainerSettings], ...]) -> list[inspect.Parameter]:
    """One typer option per field of the recipe classes (their union, first seen first)."""
    params: list[inspect.Parameter] = []
    seen: set[str] = set()
    every = tuple(RECIPES.values())
    for cls in classes:
        for name, field in cls.model_fields.items():
            if name in seen:
                continue
            seen.add(name)
            extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
            flag = str(extra.get("flag") or f"--{name.replace('_', '-')}")
            kind = _kind(field.annotation)
            owners = [c.method for c in every if name in c.model_fields and c in classes]
            applies = "" if len(owners) == len(classes) else f"{'/'.join(owners).upper()}: "
            help_text = f"{applies}{field.description or ''} [{_default_text(name, classes)}]"
            decls = [f"{flag}/--no-{flag[2:]}"] if kind is bool else [flag]
            metavar = "all-linear|NAME,NAME" if extra.get("kind") == "list" else \
                ("|".join(_choices(field.annotation) or ()) or None)
            option = typer.Option(None, *decls, help=help_text, show_default=False, hidden=bool(extra.get("hidden")),
                                  metavar=metavar)
            params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=option,
                                            annotation=Optional[kind]))
    return params


def with_recipe_options(*classes: type[TrainerSettings]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorate a command `f(..., recipe_values: dict)`: its signature gains one option per recipe field, and
    the options that were given reach it as `recipe_values` (field name -> value), unvalidated."""
    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        own = [p for p in inspect.signature(command).parameters.values() if p.name != "recipe_values"]
        generated = recipe_parameters(classes)
        names = {p.name for p in generated}

        @functools.wraps(command)
        def wrapper(**kwargs: Any) -> Any:
            values = {k: v for k, v in kwargs.items() if k in names and v is not None}
            rest = {k: v for k, v in kwargs.items() if k not in names}
            return command(**rest, recipe_values=values)

        hints = typing.get_type_hints(command)
        wrapper.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            [p.replace(annotation=hints.get(p.name, p.annotation)) for p in own] + generated)
        wrapper.__annotations__ = {**{p.name: hints.get(p.name, p.annotation) for p in own},
                                   **{p.name: p.annotation for p in generated}}
        del wrapper.__wrapped__  # typer reads the signature above, not the command's own
        return wrapper

    return decorate


__all__ = ["recipe_parameters", "with_recipe_options"]
