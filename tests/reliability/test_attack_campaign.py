"""The hostile-user campaign of benchmarks/attack_campaign.py, whole: 45 bad flags, 67 calls on bad
databases, 21 server fault modes on a fake OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import attack_campaign


@pytest.mark.parametrize("part", ["bad_flags", "bad_databases", "server_faults"])
def test_every_case_is_one_line_and_leaves_the_data_intact(tmp_path: Path, part: str, monkeypatch):
    monkeypatch.setenv("S3GYM_CONFIG", "/nonexistent/s3gym-attack.toml")
    tally = getattr(attack_campaign, part)(tmp_path)
    assert tally.cases >= {"bad_flags": 40, "bad_databases": 60, "server_faults": 20}[part]
    assert tally.problems == []
    assert tally.cases == tally.one_line == tally.intact
