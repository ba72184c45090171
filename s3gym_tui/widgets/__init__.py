"""Reusable widgets of the terminal app (no engine logic: they render values they are given)."""
