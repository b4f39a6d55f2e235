"""Makes helper modules in this folder (e.g. the serializability checker)
importable from tests and from the worker processes they spawn."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
