"""Compiled hot loops for lakekv (Cython). Each module has a pure-Python twin
in ``kvstore`` that is used, with a warning, only if the extension is missing."""
