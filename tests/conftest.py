"""Shared test set-up: offline litellm, no user config or database leaks into tests."""

import os

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
os.environ.setdefault("S3GYM_CONFIG", "/nonexistent/s3gym-test-config.toml")
