"""The hostile-user campaign of benchmarks/attack_campaign.py, whole: 45 bad flags, 67 calls on bad
databases, 21 server fault modes on a fake OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from benchmarks import attack_campaign
from s3gym_tui.engine import runner

CAP_S = 0.5  # the longest wait before a retry here (the engine's is 30 s: tests/reliability/test_attack_findings.py)


@pytest.mark.parametrize("part", ["bad_flags", "bad_databases", "server_faults"])
def test_every_case_is_one_line_and_leaves_the_data_intact(tmp_path: Path, part: str, monkeypatch):
    monkeypatch.setenv("S3GYM_CONFIG", "/nonexistent/s3gym-attack.toml")
    # a Retry-After of 1e308 waits for the cap: each run's calls get a short one (a wait the cap did not
    # bound would never end), so the campaign does not spend 2 x 30 s waiting on it
    settings = runner.call_settings
    monkeypatch.setattr(runner, "call_settings", lambda *args, **kwargs: replace(settings(*args, **kwargs),
                                                                                 backoff_cap_s=CAP_S))
    tally = getattr(attack_campaign, part)(tmp_path)
    assert tally.cases >= {"bad_flags": 40, "bad_databases": 60, "server_faults": 20}[part]
    assert tally.problems == []
    assert tally.cases == tally.one_line == tally.intact
