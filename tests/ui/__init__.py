"""UI tests (a package, so their module names do not clash with tests/engine and tests/store)."""
