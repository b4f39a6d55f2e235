"""Sorted string tables (SSTs): the public face of the SST format.

An SST is an immutable Arrow IPC file of rows ordered by key ascending, then
seq descending, cut into record-batch blocks, with a checksummed block index,
bloom filter and statistics in its last (empty) record batch. Write one with
:func:`write_sst`; read it with :meth:`SSTReader.open`; the engine keeps its
:class:`SSTInfo` (``to_dict``) in tree manifests.

>>> from kvstore.objstore.memory import MemoryStore
>>> from kvstore.format.rows import PUT, DELETE
>>> store = MemoryStore()
>>> info = write_sst(store, "sst/a.sst", [(b"k", 7, DELETE, None, None), (b"k", 3, PUT, b"v", None)])
>>> reader = SSTReader.open(store, "sst/a.sst", size=info.size)
>>> reader.get(b"k", snapshot_seq=5)
(b'k', 3, 1, b'v', None)

Layout: :mod:`kvstore.format.sst_format` and ``kvstore/format/FORMAT.md``.
"""

from __future__ import annotations

from kvstore.format.sst_format import DEFAULT_BLOCK_SIZE, DEFAULT_BLOOM_BITS_PER_KEY, FORMAT_VERSION, SSTInfo
from kvstore.format.sst_reader import SSTReader
from kvstore.format.sst_writer import encode_sst, write_sst

__all__ = [
    "DEFAULT_BLOCK_SIZE",
    "DEFAULT_BLOOM_BITS_PER_KEY",
    "FORMAT_VERSION",
    "SSTInfo",
    "SSTReader",
    "encode_sst",
    "write_sst",
]
