"""The candidate tree of an ASPIRE run: the base at the root, each candidate under its parent, with its
kind and whether score-gated retention rolled it back or kept it. Rebuilt only when the candidates
change; the highlighted candidate stays highlighted."""

from __future__ import annotations

from typing import Optional, Sequence

from rich.text import Text
from textual.widgets import Tree

from s3gym_tui.engine.aspire_view import CandidateView
from s3gym_tui.widgets.aspire_panels import candidate_label


class CandidateTree(Tree):
    """Tree of CandidateView (node.data is the candidate id). Labels pass the gate (candidate_label)."""

    DEFAULT_CSS = "CandidateTree { background: $surface; scrollbar-size-horizontal: 0; }"

    def __init__(self, *, id: Optional[str] = None) -> None:
        super().__init__(Text("candidates"), id=id)
        self.show_root = False
        self.guide_depth = 2
        self._shown: Optional[tuple] = None

    @property
    def chosen_id(self) -> Optional[str]:
        node = self.cursor_node
        return None if node is None else node.data

    def show(self, candidates: Sequence[CandidateView]) -> bool:
        """Show these candidates (no-op when nothing shown changed); True when rebuilt."""
        key = tuple((c.id, c.parent_id, c.status, c.retained, c.is_final, c.score) for c in candidates)
        if key == self._shown:
            return False
        self._shown = key
        keep = self.chosen_id
        self.clear()
        nodes = {}
        known = {c.id for c in candidates}
        for c in candidates:  # parents come before their children (store order)
            parent = nodes.get(c.parent_id) if c.parent_id in known else None
            node = (parent or self.root).add(candidate_label(c), data=c.id, expand=True)
            nodes[c.id] = node
        for node in nodes.values():
            if not node.children:
                node.allow_expand = False
        self.root.expand()
        target = nodes.get(keep) if keep is not None else None
        if target is None and candidates:  # the final candidate, else the newest
            final = next((c.id for c in candidates if c.is_final), candidates[-1].id)
            target = nodes[final]
        if target is not None:
            # Tree.clear() keeps the cursor's line and node (the old tree's): forget them without a watcher
            # (set_reactive), lay the new lines out (last_line builds them: every node gets its line), then
            # move, so that NodeHighlighted names the node now under the cursor
            self.set_reactive(Tree.cursor_line, -1)
            _ = self.last_line
            self.move_cursor(target)
        return True
