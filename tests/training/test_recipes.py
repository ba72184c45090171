"""Recipes (training/config.py) are the single source of truth of `s3gym train` / `s3gym distill`: the options
are generated from the models (a field added to a model appears in --help and is validated by the model),
a recipe file (`--config`, YAML or TOML) and a stored training (`--from`) give the same recipe back, flags
override both, and the library's defaults are the command's. No torch needed."""

from __future__ import annotations

import json
from typing import Optional

import pytest
import typer
from pydantic import Field
from typer.testing import CliRunner

from s3gym_tui.cli import main
from s3gym_tui.cli.recipe_options import with_recipe_options
from s3gym_tui.cli.train import resolve_recipe
from s3gym_tui.models import RunConfig
from s3gym_tui.store import Training
from s3gym_tui.training.config import (RECIPE_VERSION, DistillConfig, GrpoConfig, RecipeError, SftConfig, TaspoConfig,
                                       build, flag, read_recipe_file, recipe_error, stored_recipe)


def _cli(cls):
    """A one-command typer app whose options are generated from `cls`; it echoes the validated recipe."""
    app = typer.Typer()

    @app.command()
    @with_recipe_options(cls)
    def go(name: str = typer.Argument("x"), recipe_values: dict = None) -> None:  # type: ignore[assignment]
        from pydantic import ValidationError

        try:
            recipe = cls(**(recipe_values or {}))
        except ValidationError as exc:
            typer.echo(str(recipe_error(exc, cls)), err=True)
            raise typer.Exit(2)
        typer.echo(json.dumps(recipe.model_dump(mode="json")))

    return app


def test_a_setting_added_to_the_model_appears_in_help_and_is_validated_by_the_model():
    class Extended(GrpoConfig):
        rollout_bonus: Optional[int] = Field(None, ge=3, le=5, **flag("--rollout-bonus", "A setting for the test."))

    runner = CliRunner()
    app = _cli(Extended)
    helped = runner.invoke(app, ["--help"], env={"COLUMNS": "300"})
    text = " ".join(helped.output.replace("│", " ").split())
    assert helped.exit_code == 0 and "--rollout-bonus" in text and "A setting for the test." in text
    ok = runner.invoke(app, ["--rollout-bonus", "4", "--temperature", "1.5"])
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.output.strip())["rollout_bonus"] == 4 and json.loads(ok.output.strip())["temperature"] == 1.5
    bad = runner.invoke(app, ["--rollout-bonus", "9"])
    # the model's own bound, said once in one line naming the flag
    assert bad.exit_code == 2 and "--rollout-bonus must be at most 5 (given 9)" in bad.output


def test_every_recipe_field_is_an_option_of_train_and_distill(capsys):
    assert main(["train", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    for cls in (SftConfig, GrpoConfig, TaspoConfig):
        for name, field in cls.model_fields.items():
            if not field.json_schema_extra.get("hidden"):
                assert field.json_schema_extra["flag"] in text, name
    assert "[default: 16]" in text  # --warm-start: the model's default, shown from it
    assert main(["distill", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert all(f.json_schema_extra["flag"] in text for f in DistillConfig.model_fields.values()
               if not f.json_schema_extra.get("hidden"))


def test_the_library_defaults_are_the_commands():
    assert GrpoConfig().warm_start == 16 and TaspoConfig().warm_start == 16 and TaspoConfig().level == "episode"
    assert SftConfig().learning_rate == 5e-4 and GrpoConfig().learning_rate == 1e-4
    assert build("grpo", {}) == GrpoConfig()


@pytest.mark.parametrize("values, method, message", [
    ({"warm_start": 3}, "sft", "--warm-start applies to grpo, taspo, not sft"),
    ({"backend": "remote"}, "grpo", "--backend applies to sft, not grpo"),
    ({"lora_r": 0}, "sft", "--lora-r must be at least 1 (given 0)"),
    ({"level": "step"}, "taspo", "taspo is episode-level GRPO"),
    ({"vllm_url": "http://x:8000"}, "grpo", "--vllm-url names the server of --vllm server"),
    ({"full_finetune": True, "lora_r": 4}, "grpo", "--full-finetune trains every weight: --lora-r applies"),
    ({"backend": "remote"}, "sft", "--backend remote needs --remote-model"),
    ({"report_to": "mlflow"}, "grpo", "--report-to must be"),
    ({"epsilon": 0.3, "epsilon_high": 0.2}, "grpo", "--epsilon-high must be at least --epsilon"),
])
def test_one_line_refusals_name_the_flag(values, method, message):
    with pytest.raises(RecipeError) as caught:
        build(method, values)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_cli_refusals_are_one_line(tmp_path, capsys):
    db = tmp_path / "r.db"
    code = main(["train", "any-run", "--method", "sft", "--warm-start", "3", "--db", str(db)])
    err = capsys.readouterr().err
    assert code == 2 and "--warm-start applies to grpo, taspo, not sft" in err and "Traceback" not in err
    code = main(["train", "any-run", "--method", "grpo", "--loss-type", "ppo", "--db", str(db)])
    assert code == 2 and "--loss-type must be" in capsys.readouterr().err


@pytest.mark.parametrize("suffix", ["yaml", "toml"])
def test_a_recipe_file_round_trips_and_flags_override_it(tmp_path, suffix, store):
    recipe = GrpoConfig(reward="oracle", temperature=1.5, num_generations=8, warm_start=0, loss_type="dr_grpo",
                        target_modules=["q_proj", "v_proj"], lr_scheduler_type="cosine")
    data = {"method": "grpo", **recipe.model_dump(mode="json", exclude_defaults=True)}
    path = tmp_path / f"recipe.{suffix}"
    if suffix == "yaml":
        import yaml

        path.write_text(yaml.safe_dump(data))
    else:
        path.write_text("\n".join(f"{k} = {json.dumps(v)}" for k, v in data.items()) + "\n")
    assert build("grpo", {k: v for k, v in read_recipe_file(path).items() if k != "method"}) == recipe
    again = resolve_recipe(store, None, path, None, {"temperature": 0.7})
    assert isinstance(again, GrpoConfig) and again.temperature == 0.7
    assert again.model_copy(update={"temperature": 1.5}) == recipe
    # flag names work as keys too (`completion-tokens`, `lr`)
    path.write_text("method: grpo\ncompletion-tokens: 24\nlr: 0.001\n" if suffix == "yaml"
                    else 'method = "grpo"\ncompletion-tokens = 24\nlr = 0.001\n')
    read = resolve_recipe(store, None, path, None, {})
    assert (read.max_completion_length, read.learning_rate) == (24, 1e-3)


def test_bad_recipe_files_are_one_line(tmp_path, store):
    for name, text, message in (("a.yaml", "temperature: [1", "is not valid YAML"),
                                ("a.toml", "temperature = ", "is not valid TOML"),
                                ("a.json", "{}", "a .yaml, .yml or .toml file"),
                                ("a.yaml", "- 1\n- 2\n", "a mapping of settings"),
                                ("a.yaml", "method: grpo\nwarm_starts: 3\n", "--warm-starts is not a setting")):
        path = tmp_path / name
        path.write_text(text)
        with pytest.raises(Exception) as caught:
            resolve_recipe(store, None, path, None, {})
        assert message in str(caught.value) and "\n" not in str(caught.value), (name, str(caught.value))


def test_from_a_stored_training_re_runs_its_recipe(store):
    recipe = TaspoConfig(reward="oracle", credit="token", kappa=0.1, temperature=1.2, warm_start=4, seed=3)
    store.trainings.add_training(Training(id="t-new", method="taspo", games=("trust",), base="b",
                                          settings={**recipe.dump(), "seeds": [0, 1]}))
    assert store.trainings.get_training("t-new").settings["version"] == RECIPE_VERSION
    assert resolve_recipe(store, None, None, "t-new", {}) == recipe
    assert resolve_recipe(store, None, None, "t-new", {"seed": 4}) == recipe.model_copy(update={"seed": 4})
    # another method keeps only the settings it has
    as_grpo = resolve_recipe(store, "grpo", None, "t-new", {"level": "step"})
    assert type(as_grpo) is GrpoConfig and as_grpo.temperature == 1.2 and as_grpo.warm_start == 4


def test_a_training_stored_before_recipes_is_read_as_its_recipe(store):
    legacy = {"grpo": {"reward": "oracle", "updates": 3, "num_generations": 2, "states_per_update": 1,
                       "max_completion_length": 16, "temperature": 1.0, "learning_rate": 5e-4, "beta": 0.0,
                       "save_every": 1, "episodes": None, "rollout_step_cap": 2, "judge_max_new_tokens": 8,
                       "level": "step"},
              "train": {"epochs": 2, "learning_rate": 5e-4, "lora_r": 8, "lora_alpha": 16, "lora_dropout": 0.0,
                        "target_modules": "all-linear", "batch_size": 1, "grad_accum": 4, "max_steps": -1,
                        "max_length": None, "gradient_checkpointing": True, "seed": 0, "use_cpu": None},
              "seeds": [0, 1], "eval_episodes": 1, "step_cap": 2, "repair": False}
    recipe = stored_recipe(legacy, "grpo")
    # the library defaults of then: free sampling without a format term, no warm start, no grammar evaluation
    assert (recipe.sampling, recipe.format_weight, recipe.warm_start, recipe.grammar_eval) == ("free", 0.0, 0, False)
    assert (recipe.updates, recipe.learning_rate, recipe.eval_episodes) == (3, 5e-4, 1)
    sft = stored_recipe({"train": legacy["train"], "threshold": 0.5, "max_examples": 4}, "sft")
    assert (sft.epochs, sft.threshold, sft.max_examples, sft.grad_accum) == (2, 0.5, 4, 4)


def test_a_recipe_needs_no_run_to_be_checked(tmp_path, capsys):
    """The recipe is checked before the run is read: a bad setting is said even for an unknown run."""
    from s3gym_tui.store import Store

    db = tmp_path / "c.db"
    with Store(db) as store:
        store.runs.create_run(RunConfig(model="scripted/trust", game="trust"))
    assert main(["train", "nope", "--method", "grpo", "--temperature", "0", "--db", str(db)]) == 2
    assert "--temperature must be greater than 0 (given 0)" in capsys.readouterr().err
