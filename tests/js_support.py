"""The Node.js clients the tests drive (``tests/js``): installed with ``npm ci`` from the committed lock file into
``tests/js/node_modules`` (git-ignored) when one of them is missing."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

JS_DIR = Path(__file__).resolve().parent / "js"


def node_packages(*names: str) -> Path:
    """``tests/js`` with *names* installed; the test fails (not skips) when node or npm cannot provide them."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.fail("node and npm are needed for the Node.js client tests (Node.js 20 is part of this machine kind)")
    if not all((JS_DIR / "node_modules" / name / "package.json").is_file() for name in names):
        done = subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=JS_DIR,
                              capture_output=True, text=True, timeout=600, check=False)  # fmt: skip
        if done.returncode != 0:
            pytest.fail(f"npm ci in {JS_DIR} failed ({done.returncode}): {done.stderr[-2000:]}")
    return JS_DIR
