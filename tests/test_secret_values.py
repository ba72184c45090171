"""The secret values follow the environment: a key set, changed or removed is seen at the next read."""

from __future__ import annotations

from s3gym_tui.secrets import REDACTED, has_secret, redact_values, secret_values


def test_secret_values_follow_every_change_of_the_environment(monkeypatch):
    before = secret_values()
    monkeypatch.setenv("S3GYM_TEST_API_KEY", "first-secret-value-1")
    assert "first-secret-value-1" in secret_values()
    assert redact_values("x first-secret-value-1 y") == f"x {REDACTED} y"
    monkeypatch.setenv("S3GYM_TEST_API_KEY", "second-secret-value-2")  # changed in place: same names
    assert "second-secret-value-2" in secret_values() and "first-secret-value-1" not in secret_values()
    assert has_secret("... second-secret-value-2 ...") and not has_secret("first-secret-value-1")
    monkeypatch.delenv("S3GYM_TEST_API_KEY")
    monkeypatch.setenv("S3GYM_TEST_TOKEN", "third-secret-value-3")  # one removed, one added: same count
    assert "third-secret-value-3" in secret_values() and "second-secret-value-2" not in secret_values()
    monkeypatch.delenv("S3GYM_TEST_TOKEN")
    assert secret_values() == before


def test_the_list_returned_is_the_callers_own(monkeypatch):
    monkeypatch.setenv("S3GYM_TEST_API_KEY", "first-secret-value-1")
    values = secret_values()
    values.clear()
    assert "first-secret-value-1" in secret_values()
