"""`s3gym export-model TRAINING[/X] -o DIR`: a checkpoint merged into its base, as a standalone model."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from s3gym_tui.cli.common import DbOption, UserError, _store, cli, console
from s3gym_tui.textgate import safe_markup


@cli.command("export-model")
def export_model(
    spec: str = typer.Argument(..., metavar="TRAINING[/X]", help="A local training, and its checkpoint x "
                               "(default: the last; 0 is the base)."),
    out: Path = typer.Option(..., "--out", "-o", help="An empty directory for the model (created if missing)."),
    force: bool = typer.Option(False, "--force", help="Write into a directory that is not empty (its files of "
                               "the same names are replaced)."),
    db: Optional[Path] = DbOption,
) -> None:
    """Write one checkpoint of a local training as a standalone model: the LoRA adapter merged into the
    base, the tokenizer and a manifest (s3gym-export.json). Plain transformers and vLLM load it."""
    from s3gym_tui.training import MissingExtra
    from s3gym_tui.training.export_model import ExportError, export_model as export, plan

    store = _store(db)
    try:
        plan(store, spec, out, force)  # the one-line refusals, before anything loads
        exported = export(store, spec, out, force)
    except (ExportError, MissingExtra) as exc:
        raise UserError(str(exc)) from None
    base = exported.manifest["base"]
    what = "adapter merged into the base" if exported.merged else "the base itself (x = 0)"
    console.print(f"wrote {safe_markup(str(exported.directory))}: {exported.training_id} x={exported.x}, {what}, "
                  f"{exported.parameters / 1e6:.1f}M parameters (float32); base "
                  f"{safe_markup(str(base.get('model') or base.get('local_dir')))}", highlight=False)
    console.print(f"load it with transformers: AutoModelForCausalLM.from_pretrained("
                  f"{safe_markup(repr(str(exported.directory)))})", highlight=False, soft_wrap=True)
