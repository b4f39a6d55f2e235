"""Iterators over rows: the k-way merge that every scan and compaction runs through."""

from kvstore.iterators.merge import IMPLEMENTATION, merge_rows

__all__ = ["IMPLEMENTATION", "merge_rows"]
