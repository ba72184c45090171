"""The ASPIRE table of `s3gym report`: per run goal, model, protocol, base, final, retained, claimed and
measured delta; per vague run the vague-vs-explicit gap against explicit controls with the same goal,
model and protocol. Undefined figures are None ("—"), never 0; aggregates say how many values they used."""

from __future__ import annotations

from typing import Any, Optional


def _score(scores, purpose: str) -> Optional[float]:
    for s in scores:
        if s.purpose == purpose:
            return s.score
    return None


def _mean(values: list[Optional[float]]) -> tuple[Optional[float], int]:
    used = [v for v in values if v is not None]
    return (sum(used) / len(used) if used else None), len(used)


def aspire_rows(store) -> list[dict[str, Any]]:
    rows = []
    for run in reversed(store.aspire.list_aspire_runs(limit=10_000)):
        scores = store.aspire.hidden_scores(run.id)
        claims = store.aspire.aspire_claims(run.id)
        base, final, retained = (_score(scores, p) for p in ("base", "final", "retained"))
        rows.append({
            "id": run.id, "goal": run.goal_id, "explicit": run.explicit, "model": run.model,
            "protocol": run.protocol, "status": run.status, "base": base, "final": final,
            "retained": retained, "kept": None if run.retained_candidate_id is None
            else run.retained_candidate_id != run.base_candidate_id,
            "claimed_delta": claims[-1].claimed_delta if claims else None,
            "measured_delta": None if base is None or final is None else final - base,
        })
    for row in rows:
        if row["explicit"]:
            row["gap"], row["gap_n"] = None, 0
            continue
        controls = [r["final"] for r in rows if r["explicit"] and r["goal"] == row["goal"]
                    and r["model"] == row["model"] and r["protocol"] == row["protocol"]]
        control, n = _mean(controls)
        row["gap"] = None if control is None or row["final"] is None else control - row["final"]
        row["gap_n"] = n  # explicit controls averaged
    return rows


def aspire_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Across runs: how many final candidates beat their base, how many were retained, the mean gap."""
    measured = [r["measured_delta"] for r in rows if r["measured_delta"] is not None]
    gap, n_gap = _mean([r["gap"] for r in rows if not r["explicit"]])
    kept = [r["kept"] for r in rows if r["kept"] is not None]
    return {"runs": len(rows), "final_beats_base": sum(d > 0 for d in measured), "measured_n": len(measured),
            "retained": sum(kept), "retained_n": len(kept), "mean_gap": gap, "gap_n": n_gap}
