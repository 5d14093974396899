"""Where the checkout is, for tests that run the CLI from it."""

from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[1]
