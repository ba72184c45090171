"""Schema of the s3gym store: plain tables (JSON as text), indexes, ordered migrations, version."""

from __future__ import annotations

import sqlite3
from typing import Callable

from sqlite_utils import Database

from s3gym_tui.store.errors import StoreError

META_TABLE = "meta"
VERSION_KEY = "schema_version"

Migration = Callable[[Database], None]


def _v1(db: Database) -> None:
    """Version 1: runs, episodes, steps, summaries, checkpoints, datasets, dataset_rows."""
    db[META_TABLE].create({"key": str, "value": str}, pk="key", not_null={"value"})
    db["runs"].create(
        {"id": str, "config": str, "game": str, "model": str, "pathway": str, "status": str,
         "created_at": str, "note": str},
        pk="id", not_null={"config", "game", "model", "pathway", "status", "created_at", "note"},
        defaults={"status": "created", "note": ""},
    )
    db["episodes"].create(
        {"id": str, "run_id": str, "game": str, "mode": str, "phase": str, "seed": int, "index": int,
         "checkpoint": int, "model": str, "pathway": str, "status": str, "score": float,
         "n_steps": int, "summary_id": str, "history_episode_ids": str, "history_cut": int,
         "fork_of": str, "fork_step": int, "started_at": str, "finished_at": str},
        pk="id",
        not_null={"game", "mode", "phase", "seed", "index", "model", "pathway", "status", "n_steps",
                  "history_episode_ids", "history_cut", "started_at"},
        defaults={"n_steps": 0, "history_episode_ids": "[]", "history_cut": 0, "status": "running"},
        foreign_keys=[("run_id", "runs", "id")],
    )
    # Large text last (prompt can be ~100 kB with History ICL): reading the small columns of a
    # row then never walks the prompt's overflow pages.
    db["steps"].create(
        {"episode_id": str, "index": int, "action": str, "self_score": float, "reward": float,
         "valid": bool, "terminated": bool, "truncated": bool, "actor": str,
         "proposed_action": str, "fault": str, "tokens_in": int, "tokens_out": int,
         "latency_ms": float, "cost": float, "created_at": str, "feedback": str,
         "observation": str, "reply": str, "prompt": str},
        not_null={"episode_id", "index", "observation", "prompt", "reply", "action", "reward",
                  "feedback", "valid", "terminated", "truncated", "actor", "tokens_in",
                  "tokens_out", "latency_ms", "created_at"},
        foreign_keys=[("episode_id", "episodes", "id")],
    )
    db["summaries"].create(
        {"id": str, "run_id": str, "game": str, "version": int, "retain": str, "avoid": str,
         "next": str, "source_episode_ids": str, "status": str, "pinned": bool, "author": str,
         "parent_version": int, "created_at": str, "for_episode_id": str},
        pk="id",
        not_null={"run_id", "game", "version", "retain", "avoid", "next", "source_episode_ids",
                  "status", "pinned", "author", "created_at"},
        defaults={"source_episode_ids": "[]", "status": "active", "pinned": 0},
        foreign_keys=[("run_id", "runs", "id")],
    )
    db["checkpoints"].create(
        {"run_id": str, "x": int, "episode_ids": str, "scores": str},
        pk=("run_id", "x"), not_null={"run_id", "x", "episode_ids", "scores"},
        foreign_keys=[("run_id", "runs", "id")],
    )
    db["datasets"].create(
        {"id": str, "run_id": str, "rule": str, "created_at": str, "counts": str},
        pk="id", not_null={"rule", "created_at", "counts"},
        foreign_keys=[("run_id", "runs", "id")],
    )
    db["dataset_rows"].create(
        {"dataset_id": str, "episode_id": str, "step_index": int, "kind": str, "messages": str},
        not_null={"dataset_id", "episode_id", "step_index", "kind", "messages"},
        foreign_keys=[("dataset_id", "datasets", "id"), ("episode_id", "episodes", "id")],
    )
    db["runs"].create_index(["created_at"], index_name="idx_runs_created_at")
    db["episodes"].create_index(["run_id", "phase", "checkpoint"],
                                index_name="idx_episodes_run_phase_checkpoint")
    db["steps"].create_index(["episode_id", "index"], index_name="idx_steps_episode_index",
                             unique=True)
    db["summaries"].create_index(["run_id", "version"], index_name="idx_summaries_run_version",
                                 unique=True)
    db["datasets"].create_index(["run_id"], index_name="idx_datasets_run")
    db["dataset_rows"].create_index(["dataset_id", "episode_id", "step_index"],
                                    index_name="idx_dataset_rows_unique", unique=True)
    db["dataset_rows"].create_index(["episode_id"], index_name="idx_dataset_rows_episode")


def _v2(db: Database) -> None:
    """Version 2: shared prompt parts. A step's prompt stores `[[text:<key>]]` in place of a large
    block that many steps share (the Hint Messages of an episode), stored once in `texts`."""
    db["texts"].create({"key": str, "text": str}, pk="key", not_null={"text"})


def _v3(db: Database) -> None:
    """Version 3: live sharing of one file by several processes.

    - `runs.status_reason`: why a run stopped or failed (Ctrl-C, SIGTERM, disk full, the model).
    - `leases`: the one process driving a run (pid, host, heartbeat); resume only when it is gone.
    - `experience_states`: the summary version each experience state x was built from (recorded in
      the transaction that starts it, so a human edit is exactly before or after it) and the one
      it uses (the pinned base, or the version the model wrote for x).
    - `summary_actions`: every curation (edit, veto, unveto, pin, unpin): who, when, and the first
      state x that uses it."""
    db["runs"].add_column("status_reason", str, not_null_default="")
    db["leases"].create(
        {"run_id": str, "token": str, "pid": int, "host": str, "command": str,
         "acquired_at": str, "heartbeat_at": float},
        pk="run_id", not_null={"token", "pid", "host", "command", "acquired_at", "heartbeat_at"},
        foreign_keys=[("run_id", "runs", "id")],
    )
    db["experience_states"].create(
        {"run_id": str, "x": int, "base_summary_id": str, "summary_id": str, "began_at": str},
        pk=("run_id", "x"), not_null={"run_id", "x", "began_at"},
        foreign_keys=[("run_id", "runs", "id"), ("base_summary_id", "summaries", "id"),
                      ("summary_id", "summaries", "id")],
    )
    db["summary_actions"].create(
        {"id": int, "run_id": str, "summary_id": str, "action": str, "author": str,
         "created_at": str, "effective_from_x": int},
        pk="id", not_null={"run_id", "summary_id", "action", "author", "created_at"},
        foreign_keys=[("run_id", "runs", "id"), ("summary_id", "summaries", "id")],
    )
    db["summary_actions"].create_index(["run_id"], index_name="idx_summary_actions_run")
    db["summary_actions"].create_index(["summary_id"], index_name="idx_summary_actions_summary")


def _v4_prompt_deltas(db: Database) -> None:
    """Version 4: a step's prompt may be stored as a delta against an earlier prompt of its episode
    (`[[delta]]...`, see prompt_delta.py), so that an episode's prompts cost O(n), not O(n^2).
    No table changes: prompts already stored read as before; the version bump keeps an older
    s3gym, which would show a delta as the prompt, from opening a file that has them."""
    db.execute("SELECT 1 FROM steps LIMIT 1")


def _v5(db: Database) -> None:
    """Version 5: sweeps, declared foreign keys for every id reference, steps.id (migrate_keys)."""
    from s3gym_tui.store.migrate_keys import sweeps_and_keys

    sweeps_and_keys(db)


def _v6_trainings(db: Database) -> None:
    """Version 6: tables for trainings (checkpoints, losses, evaluation runs, sources) and studies;
    dataset rows say why a row was dropped and how many tokens it has; old run notes move over."""
    from s3gym_tui.store.schema_trainings import migrate_trainings

    migrate_trainings(db)


def _v7_fork_experience(db: Database) -> None:
    """Version 7 (forks): what an episode may see, recorded with it (engine.visibility): the run and
    experience state x whose exploration episodes it may see, and who decided it (the run's own
    state, a fork as its source, a person's choice, none). Older rows stay NULL (derived on read)."""
    db.execute("ALTER TABLE episodes ADD COLUMN experience_run_id TEXT REFERENCES runs(id)")
    db.execute("CREATE INDEX idx_episodes_experience_run ON episodes (experience_run_id)")
    db.execute("ALTER TABLE episodes ADD COLUMN experience_x INTEGER")
    db.execute("ALTER TABLE episodes ADD COLUMN experience_source TEXT")


def _v8_search_and_annotations(db: Database) -> None:
    """Version 8 (search and annotations): a full-text index (FTS5) over steps, summaries and
    annotation notes, kept current by triggers; `annotations` (a label and a note on a step, an
    episode or a summary version, by whom and when, with an optional corrected action). Steps
    already stored become the index's backlog, indexed on first search (store/search_schema.py)."""
    from s3gym_tui.store.migrate_search import search_v8

    search_v8(db.conn)


def _v9_training_facts(db: Database) -> None:
    """Version 9 (training facts): a reply the `trained` provider repaired (regenerated under the
    game's answer grammar, only when asked) keeps the model's own reply next to the repaired one the
    game acted on (`step_repairs`; a row is the `repaired` mark), so repair counts are read from the
    store; a training's driver holds a lease like a run's (`training_leases`), so a killed training
    reads as interrupted."""
    db.execute('CREATE TABLE step_repairs (episode_id TEXT NOT NULL REFERENCES episodes(id), '
               '"index" INTEGER NOT NULL, original_reply TEXT NOT NULL, repaired_reply TEXT NOT NULL, '
               'PRIMARY KEY (episode_id, "index"))')
    db.execute("CREATE TABLE training_leases (training_id TEXT PRIMARY KEY REFERENCES trainings(id) "
               "ON DELETE CASCADE, token TEXT NOT NULL, pid INTEGER NOT NULL, host TEXT NOT NULL, "
               "command TEXT NOT NULL, acquired_at TEXT NOT NULL, heartbeat_at FLOAT NOT NULL)")


def _v10_search_queue(db: Database) -> None:
    """Version 10 (search): steps are queued for the index by their trigger and indexed in batches
    (an episode's end, a search) instead of one by one (store/search_schema.py, migrate_search.py)."""
    from s3gym_tui.store.migrate_search import search_queue_v10

    search_queue_v10(db.conn)


def _v11_cached_input_tokens(db: Database) -> None:
    """Version 11 (prompt caching): per step, the input tokens of its model call that the provider read
    from its prompt cache and wrote to it (engine.prompt_cache). NULL: the provider did not say, and
    every step stored before this version (its figure is unknown, not 0)."""
    db.execute("ALTER TABLE steps ADD COLUMN tokens_cached INTEGER")
    db.execute("ALTER TABLE steps ADD COLUMN tokens_cache_write INTEGER")


def _v12_credit_per_action(db: Database) -> None:
    """Version 12 (credit per action, TASPO): PI extractions (the analyzer's prompt and raw reply, the
    sibling group read, who was judged successful and how), PI items with evidence (episode, step),
    and computed episode credit with its per-action weights (store/credit.py). New tables only."""
    from s3gym_tui.store.credit_schema import credit_tables

    credit_tables(db.conn)


def _v13_aspire(db: Database) -> None:
    """Version 13 (ASPIRE, issue 25): self-directed improvement runs, their decisions (tool calls),
    candidates with lineage, claims, hidden scores and the ordinary runs they made (schema_aspire.py)."""
    from s3gym_tui.store.schema_aspire import migrate_aspire

    migrate_aspire(db.conn)


def _v14_aspire_leases(db: Database) -> None:
    """Version 14 (ASPIRE runs as processes): the one process driving an ASPIRE run holds a lease like a
    run's or a training's (`aspire_leases`, renewed by a heartbeat), so the app follows a run started
    anywhere, tells a killed one (interrupted) from a live one, and a second driver is refused."""
    db.execute("CREATE TABLE aspire_leases (aspire_id TEXT PRIMARY KEY REFERENCES aspire_runs(id) "
               "ON DELETE CASCADE, token TEXT NOT NULL, pid INTEGER NOT NULL, host TEXT NOT NULL, "
               "command TEXT NOT NULL, acquired_at TEXT NOT NULL, heartbeat_at FLOAT NOT NULL)")


def _v15_aspire_suite_secret(db: Database) -> None:
    """Version 15 (issue 36): hidden suites no source names, decisions that say what was cut.
    `aspire_suite_secret` holds the store's secret (one row, random, made here once: a new store gets
    it at creation, an existing one on this upgrade) that new ASPIRE runs draw their hidden suite's
    seeds from (`aspire_runs.suite` = 'drawn'); the runs stored before keep the fixed seeds of the
    source they were judged on ('fixed'). `aspire_decisions.fault` names what was cut of a
    decision's text (its reply, arguments, result), as steps.fault does. Plain SQL, self-contained."""
    import secrets

    db.execute("ALTER TABLE aspire_runs ADD COLUMN suite TEXT NOT NULL DEFAULT 'drawn'")
    db.execute("UPDATE aspire_runs SET suite = 'fixed'")
    db.execute("ALTER TABLE aspire_decisions ADD COLUMN fault TEXT")
    db.execute("CREATE TABLE aspire_suite_secret (id INTEGER PRIMARY KEY CHECK (id = 1), secret TEXT NOT NULL)")
    db.execute("INSERT INTO aspire_suite_secret (id, secret) VALUES (1, ?)", (secrets.token_hex(32),))


def _v16_prompt_parts(db: Database) -> None:
    """Version 16 (prompts readable in SQL, issue 39): a step's prompt is stored as its parts in order,
    JSON that the view `step_prompts` joins back with plain SQL (copies of its base step's prompt, new
    text, shared parts in `texts`, stored as they appear in the prompt; store/stored_prompt.py).
    Every stored prompt is rebuilt from the old layout and stored again (store/migrate_prompts.py)."""
    from s3gym_tui.store.migrate_prompts import prompt_parts_v16

    prompt_parts_v16(db.conn)


# Ordered: MIGRATIONS[i] takes the schema from version i to version i + 1. Append, never edit.
# Every pending migration runs inside ONE BEGIN IMMEDIATE transaction together with the version
# bump (SQLite's DDL is transactional), so a failed or killed upgrade leaves the file at the version
# it had, never an intermediate one. Migrations run with foreign-key enforcement off (set before the
# transaction: the pragma is a no-op inside one), so a table can be rebuilt (sqlite-utils `transform`
# nests in a SAVEPOINT), and `PRAGMA foreign_key_check` must pass after each of them. The views of
# views.py are dropped before and recreated after the migrations.
MIGRATIONS: list[Migration] = [_v1, _v2, _v3, _v4_prompt_deltas, _v5, _v6_trainings,
                                _v7_fork_experience, _v8_search_and_annotations, _v9_training_facts,
                                _v10_search_queue, _v11_cached_input_tokens,
                                _v12_credit_per_action, _v13_aspire, _v14_aspire_leases,
                                _v15_aspire_suite_secret, _v16_prompt_parts]

SCHEMA_VERSION = len(MIGRATIONS)


def current_version() -> int:
    """The schema version this code writes (read at call time, so tests can extend MIGRATIONS)."""
    return len(MIGRATIONS)


def stored_version(conn: sqlite3.Connection) -> int | None:
    """The version recorded in the file: 0 for an empty database, None if it is not an s3gym store."""
    names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if not names:
        return 0
    if META_TABLE not in names:
        return None
    row = conn.execute(f"SELECT value FROM {META_TABLE} WHERE key = ?", (VERSION_KEY,)).fetchone()
    if row is None:
        return None
    try:
        return int(row[0])
    except (TypeError, ValueError):
        return None


def newer_message(path: object, found: int) -> str:
    return (f"{path} was written by a newer s3gym (schema {found} > {current_version()}); "
            f"upgrade s3gym")


def migrate(db: Database, path: object = "database") -> int:
    """Bring the schema up to date, every pending migration in one transaction; return the version.

    Safe against a concurrent opener: the version is re-read inside the write lock. An older file is
    upgraded through store/upgrade.py (checks, backup, notice), which calls this.
    """
    conn = db.conn
    target = current_version()
    if stored_version(conn) == target:  # the usual case: no write lock needed to open
        return target
    enforced = conn.execute("PRAGMA foreign_keys").fetchone()[0]
    secure = conn.execute("PRAGMA secure_delete").fetchone()[0]
    conn.execute("PRAGMA foreign_keys = OFF")  # a no-op inside a transaction: set before BEGIN
    conn.execute("PRAGMA legacy_alter_table = ON")  # a rebuild's rename leaves any view alone
    # A rebuilt table's old pages hold what its copy holds: zeroing them (SECURE_DELETE, on in
    # Debian's SQLite) would write them all to the WAL again, doubling the upgrade's peak size.
    conn.execute("PRAGMA secure_delete = FAST")
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            found = stored_version(conn)
            if found is None:
                raise StoreError(f"{path} is an SQLite database but not an s3gym store")
            if found > target:
                raise StoreError(newer_message(path, found))
            if found < target:
                _apply(db, path, found, target)
            conn.execute("COMMIT")
            return target
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
    finally:
        conn.execute("PRAGMA legacy_alter_table = OFF")
        conn.execute(f"PRAGMA secure_delete = {({0: 'OFF', 2: 'FAST'}).get(secure, 'ON')}")
        conn.execute(f"PRAGMA foreign_keys = {'ON' if enforced else 'OFF'}")


def _apply(db: Database, path: object, found: int, target: int) -> None:
    """MIGRATIONS[found:target], the views and the version bump, inside the caller's transaction."""
    from s3gym_tui.store.search_schema import restore_triggers
    from s3gym_tui.store.views import create_views, drop_views

    conn = db.conn
    drop_views(conn)
    for version in range(found, target):
        MIGRATIONS[version](db)
        if not conn.in_transaction:  # a migration that committed would break all-or-nothing
            raise StoreError(f"{path}: migration to schema {version + 1} ended the upgrade's "
                             f"transaction (a migration must not COMMIT)")
        broken = conn.execute("PRAGMA foreign_key_check").fetchall()
        if broken:
            table, rowid, parent, _ = broken[0]
            raise StoreError(f"{path}: migration to schema {version + 1} stopped: row {rowid} "
                             f"of {table} names a missing {parent} row ({len(broken)} such "
                             f"rows)")
    create_views(conn)
    restore_triggers(conn)  # a migration that rebuilt steps dropped its index triggers
    conn.execute(f"INSERT OR REPLACE INTO {META_TABLE} (key, value) VALUES (?, ?)",
                 (VERSION_KEY, str(target)))
