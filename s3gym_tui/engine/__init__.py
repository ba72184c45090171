"""The S3Gym engine: run orchestration, metrics and judging (pure parts import no UI)."""
