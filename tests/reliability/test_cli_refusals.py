"""Refused before anything is stored: non-finite or out-of-range numbers of the training commands,
and any reading command on a --db path that does not exist (a typo must not leave an empty store)."""

from __future__ import annotations

import pytest

from s3gym_tui.cli import main


@pytest.mark.parametrize("args, says", [
    (["train", "r", "--lr", "nan"], "--lr must be a finite number"),
    (["train", "r", "--lr", "-1"], "--lr must be greater than 0"),
    (["train", "r", "--lr", "2"], "--lr must be at most 1"),
    (["train", "r", "--threshold", "nan"], "--threshold must be a finite number"),
    (["train", "r", "--max-steps", "0"], "--max-steps must be -1"),
    (["dataset", "r", "-o", "out", "--threshold", "inf"], "--threshold must be a finite number"),
    (["distill", "a", "b", "--lr", "0"], "--lr must be greater than 0"),
    (["distill", "a", "b", "--threshold", "-inf"], "--threshold must be a finite number"),
    (["distill", "a", "b", "--phase1-steps", "-5"], "--phase1-steps must be -1"),
])
def test_bad_training_numbers_are_refused_in_one_line(tmp_path, capsys, args, says):
    db = tmp_path / "s.db"
    assert main([*args, "--db", str(db)]) == 2
    err = capsys.readouterr().err.strip()
    assert says in err and len(err.splitlines()) == 1
    assert not db.exists()  # refused before the store was even opened


@pytest.mark.parametrize("args", [["runs"], ["sweeps"], ["trainings"], ["report"], ["audit"], ["vacuum"],
                                  ["resume", "x"], ["export", "x"], ["rm", "x", "--yes"], ["train", "x"],
                                  ["dataset", "x", "-o", "out"], ["matrix"]])
def test_a_reading_command_on_a_missing_database_says_so_and_creates_nothing(tmp_path, capsys, args):
    db = tmp_path / "typo.db"
    assert main([*args, "--db", str(db)]) == 2
    err = capsys.readouterr().err.strip()
    assert f"no database at {db}" in " ".join(err.split()) or "not installed" in err, err
    assert list(tmp_path.iterdir()) == []


def test_run_still_creates_a_new_database(tmp_path):
    db = tmp_path / "new.db"
    assert main(["run", "trust", "-m", "scripted/trust", "--episodes", "1", "--eval-every", "1",
                 "--eval-episodes", "1", "--db", str(db)]) == 0
    assert db.exists()


# ----- integers the store cannot hold, ids, --version, unknown games (issue 36) ----------------------
def _integer_options():
    """(command, option) for every option of the CLI whose value is an integer (or a list of them)."""
    import typer.main

    from s3gym_tui.cli import cli

    found = []
    for name, command in sorted(typer.main.get_command(cli).commands.items()):
        for param in command.params:
            kind = getattr(param, "type_descriptor", None)
            annotation = getattr(kind, "annotation", None)
            if annotation is int or getattr(annotation, "__args__", None) == (int,):
                found.append((name, param.opts[0]))
    return found


INTEGER_OPTIONS = _integer_options()


def test_the_cli_has_integer_options_to_check():
    assert len(INTEGER_OPTIONS) > 40 and ("run", "--seed") in INTEGER_OPTIONS and ("sweep", "--seed") in INTEGER_OPTIONS


@pytest.mark.parametrize("command, option", INTEGER_OPTIONS)
def test_every_integer_option_refuses_what_sqlite_cannot_store_in_one_line(tmp_path, capsys, monkeypatch,
                                                                           command, option):
    """10**26 (or 2**63) used to be taken and stored (`run --seed`), or to end in a traceback; SQLite's
    integers are 64-bit. Nothing is created."""
    monkeypatch.setenv("S3GYM_DB", str(tmp_path / "s.db"))
    monkeypatch.setenv("S3GYM_CONFIG", str(tmp_path / "config.toml"))
    for huge in (10 ** 26, 2 ** 63, -2 ** 63 - 1):
        assert main([command, option, str(huge)]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and f"'{option}'" in err and "Traceback" not in err, err
    assert list(tmp_path.iterdir()) == []


def test_the_largest_storable_seed_is_still_taken_and_stored(tmp_path):
    from s3gym_tui.store import Store

    db = tmp_path / "s.db"
    assert main(["run", "trust", "-m", "scripted/trust", "--episodes", "1", "--eval-every", "1",
                 "--eval-episodes", "1", "--seed", str(2 ** 63 - 1), "--progress", "none", "--db", str(db)]) == 0
    with Store(db) as store:
        assert store.runs.list_runs()[0].config.decoding_seed == 2 ** 63 - 1


@pytest.fixture
def played(tmp_path) -> str:
    db = str(tmp_path / "s.db")
    assert main(["run", "trust", "-m", "scripted/trust", "--episodes", "1", "--eval-every", "1",
                 "--eval-episodes", "1", "--progress", "none", "--db", db]) == 0
    return db


@pytest.mark.parametrize("suffix, says", [
    ("#1180591620717411303424", "step index 1180591620717411303424 is out of range"),
    ("#9223372036854775808", "out of range"),
    ("#²", "is not EPISODE#STEP"),  # str.isdigit() takes it, int() does not
    ("#-1", "is not EPISODE#STEP"),
])
def test_annotate_refuses_a_step_index_it_cannot_look_up_in_one_line(played, capsys, monkeypatch, tmp_path,
                                                                     suffix, says):
    from tests.reliability.support import dump

    from s3gym_tui.store import Store

    monkeypatch.setenv("S3GYM_CONFIG", str(tmp_path / "config.toml"))
    with Store(played) as store:
        episode = store.episodes.list()[0].id
    capsys.readouterr()
    before = dump(played)
    assert main(["annotate", episode + suffix, "mistake", "--db", played]) == 2
    err = capsys.readouterr().err.strip()
    assert says in err and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert dump(played) == before


@pytest.mark.parametrize("args, says", [
    (["export-model", "t/99999999999999999999999999", "-o", "out"], "checkpoint 99999999999999999999999999 is out of range"),
    (["export-model", "t/²", "-o", "out"], "a checkpoint is a number"),
    (["run", "trust", "-m", "scripted/trust", "--model-arg", "seed=100000000000000000000000"],
     "--model-arg seed: 100000000000000000000000 is out of range"),
    (["run", "trust", "-m", "scripted/trust", "--model-arg", 'logit_bias={"1": 1e5, "2": 100000000000000000000000}'],
     "out of range"),
    (["aspire", "-m", "scripted", "--goal", "win", "--budget", "calls=1e400"], "--budget: budget calls='1e400' is out of range"),
    (["aspire", "-m", "scripted", "--goal", "win", "--budget", "tokens=nan"], "out of range"),
])
def test_numbers_inside_ids_and_settings_are_refused_in_one_line(played, capsys, args, says):
    from tests.reliability.support import dump

    capsys.readouterr()
    before = dump(played)
    assert main([*args, "--db", played]) == 2
    err = capsys.readouterr().err.strip()
    assert says in err and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert dump(played) == before


@pytest.mark.parametrize("args", [["--version", "extra"], ["--version", "--version"], ["--version", "run"]])
def test_version_takes_nothing_after_it(capsys, args):
    assert main(args) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "--version takes nothing after it" in captured.err
    assert len(captured.err.strip().splitlines()) == 1


def test_version_alone_prints_the_version(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("s3gym ")


CHOICES = "unknown game 'nosuchgame': choose one of chess, minesweeper, nullify, tetris, snake, pvz, trust"


@pytest.mark.parametrize("args", [
    ["search", "--game", "nosuchgame", "cheat"],
    ["search", "--game", "trust", "--game", "nosuchgame"],
    ["run", "nosuchgame", "-m", "scripted/trust"],
    ["play", "nosuchgame"],
    ["sweep", "--games", "nosuchgame", "--models", "scripted", "--yes"],
])
def test_an_unknown_game_is_refused_alike_by_every_command(played, capsys, args):
    """`search --game nosuchgame` said "no matches" (exit 0) where a bad --phase was refused."""
    from tests.reliability.support import dump

    capsys.readouterr()
    before = dump(played)
    code = main([*args, "--db", played] if args[0] != "play" else args)
    err = capsys.readouterr().err.strip()
    assert code == 2 and CHOICES in err and len(err.splitlines()) == 1, err
    assert dump(played) == before


def test_search_takes_a_game_in_any_case_and_refuses_an_unknown_pathway(played, capsys):
    capsys.readouterr()
    assert main(["search", "--game", "TRUST", "cheat", "--db", played]) == 0
    assert "no matches" not in capsys.readouterr().out
    assert main(["search", "--pathway", "nosuch", "cheat", "--db", played]) == 2
    assert "--pathway: unknown pathway 'nosuch': one of none, history, summary, trained" in capsys.readouterr().err


def test_the_config_file_and_the_stored_run_refuse_integers_sqlite_cannot_store(tmp_path, capsys, monkeypatch):
    """The CLI's options are not the only way in: a config file's model settings, and a run made by the app."""
    from pydantic import ValidationError

    from s3gym_tui.models import RunConfig

    config = tmp_path / "config.toml"
    config.write_text('[models."scripted/trust"]\nmax_tokens = 100000000000000000000000000\n', encoding="utf-8")
    monkeypatch.setenv("S3GYM_CONFIG", str(config))
    db = tmp_path / "s.db"
    assert main(["run", "trust", "-m", "scripted/trust", "--episodes", "1", "--db", str(db)]) == 2
    err = capsys.readouterr().err.strip()
    assert f"config file {config}" in " ".join(err.split()) and "max_tokens" in err and len(err.splitlines()) == 1
    assert not db.exists()
    for given in ({"decoding_seed": 2 ** 63}, {"max_tokens": 10 ** 26},
                  {"model_args": {"logit_bias": {"1": 10 ** 30}}}):
        with pytest.raises(ValidationError):
            RunConfig(model="scripted/trust", game="trust", **given)
    assert RunConfig(model="scripted/trust", game="trust", decoding_seed=-2 ** 63).decoding_seed == -2 ** 63
