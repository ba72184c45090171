"""ASPIRE runs as processes: the one driver holds a lease (store.leases.acquire_aspire_lease, engine.lease.driving_aspire),
renewed by a heartbeat; a second live driver is refused; a dead one (its process gone) can be taken over; the
lease goes when the driver ends, and with the run."""

from __future__ import annotations

import subprocess
import sys

import pytest

from s3gym_tui.engine.lease import driving_aspire
from s3gym_tui.store import Store, StoreError
from s3gym_tui.store.leases import RunBusy


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "a.db") as store:
        store.aspire.create_aspire_run(goal_id="rules", goal_text="g", model="scripted", protocol="final", budget={},
                                       aspire_id="asp-1")
        yield store


def test_the_driver_holds_the_lease_while_it_drives_and_lets_go_after(store):
    assert store.leases.aspire_lease("asp-1") is None
    with driving_aspire(store, "asp-1", "s3gym aspire"):
        lease = store.leases.aspire_lease("asp-1")
        assert lease.alive() and lease.mine and lease.kind == "aspire" and "s3gym aspire" in lease.describe()
        assert list(store.leases.live_aspire_leases()) == ["asp-1"]
        assert store.leases.live_leases() == {}  # not a protocol run's lease
    assert store.leases.aspire_lease("asp-1") is None and store.leases.live_aspire_leases() == {}


def test_a_second_live_driver_is_refused_a_dead_one_is_taken_over(store, tmp_path):
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        with store.conn:
            store.conn.execute("INSERT INTO aspire_leases VALUES ('asp-1', 't', ?, ?, 's3gym aspire', '2026', "
                               "strftime('%s','now'))", (other.pid, __import__("socket").gethostname()))
        with pytest.raises(RunBusy, match=f"ASPIRE run asp-1 is being driven by PID {other.pid}"):
            store.leases.acquire_aspire_lease("asp-1")
    finally:
        other.kill()
        other.wait()
    lease = store.leases.acquire_aspire_lease("asp-1")  # its process is gone: the lease is free
    assert lease.mine


def test_no_lease_for_an_unknown_run_and_none_left_when_the_run_goes(store):
    with pytest.raises(StoreError, match="no ASPIRE run"):
        store.leases.acquire_aspire_lease("nope")
    store.leases.acquire_aspire_lease("asp-1")
    with store.conn:
        store.conn.execute("DELETE FROM aspire_runs WHERE id = 'asp-1'")
    assert store.leases.aspire_lease("asp-1") is None
