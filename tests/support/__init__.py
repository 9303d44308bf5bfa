"""Helper modules shared by the tests, imported by their package name
(`from tests.support import logtools`), in test modules and in the child processes they start.

REPO_ROOT is the directory holding `tests/`: a child process that imports a helper gets it on
its sys.path (as an argument it inserts, or as PYTHONPATH)."""

from __future__ import annotations

import os

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
