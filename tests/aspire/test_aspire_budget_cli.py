"""Budget parsing and limits, and one clear line for bad `s3gym aspire` input (nothing stored)."""

from __future__ import annotations

import pytest

from s3gym_tui.cli import main
from s3gym_tui.engine.aspire.budget import Budget, Usage


def test_budget_parse_and_every_limit():
    b = Budget.parse("calls=5,tokens=100,dollars=0.5,seconds=none,decisions=3")
    assert (b.calls, b.tokens, b.dollars, b.seconds, b.decisions) == (5, 100, 0.5, None, 3)
    for text in ("calls", "wings=3", "calls=-1", "calls=many"):
        with pytest.raises(ValueError):
            Budget.parse(text)
    u = Usage()
    assert u.spent(b) is None
    u.charge(1, 10, None, 1.0)  # an unpriced call: counted, its dollars unknown (not 0)
    assert u.unpriced_calls == 1 and u.dollars == 0 and u.spent(b) is None
    u.charge(1, 10, 0.6, 1.0)
    assert u.spent(b) == "dollars budget spent (0.6 of 0.5)"
    assert Usage(tokens=100).spent(b).startswith("tokens budget spent")
    assert Usage(calls=5).spent(b).startswith("calls budget spent")
    assert Usage(decisions=3).spent(b).startswith("decisions budget spent")
    assert Usage(seconds=1e9).spent(b) is None  # no wall-time limit given
    assert Usage(calls=2).left(b)["calls"] == 3 and Usage().left(b)["seconds"] is None


@pytest.mark.parametrize("args, message", [
    (["--goal-id", "nope", "--model", "scripted"], "unknown goal id 'nope'"),
    (["--goal-id", "rules", "--model", "scripted", "--budget", "wings=2"], "--budget: budget part 'wings=2'"),
    (["--goal-id", "rules", "--model", "scripted", "--protocol", "sometimes"], "--protocol 'sometimes'"),
    (["--goal-id", "rules", "--goal", "x", "--model", "scripted"], "give --goal TEXT or --goal-id ID"),
    (["--resume", "aspire-none"], "no ASPIRE run 'aspire-none'"),
])
def test_bad_input_is_one_line_and_stores_nothing(tmp_path, capsys, args, message):
    db = tmp_path / "a.db"
    if args[0] == "--resume":
        assert main(["aspire", "--goal-id", "rules", "--model", "scripted", "--budget", "decisions=0",
                     "--db", str(db)]) == 0
        capsys.readouterr()
    code = main(["aspire", *args, "--db", str(db)])
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    if args[0] != "--resume":
        assert not db.exists()
