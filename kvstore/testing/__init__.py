"""Helpers for tests and benchmarks that need real servers; not used by the engine."""

from __future__ import annotations

from kvstore.testing.seaweed import SeaweedServer, find_weed, pick_ports

__all__ = ["SeaweedServer", "find_weed", "pick_ports"]
