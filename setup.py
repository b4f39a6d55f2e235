"""Build script: compiles the Cython hot loops in cython_ext/.

Everything else about the package lives in pyproject.toml; setuptools still
needs this file to declare the compiled extensions.
"""

from Cython.Build import cythonize
from setuptools import Extension, setup

extensions = [
    Extension("cython_ext._checksum", ["cython_ext/_checksum.pyx"], extra_compile_args=["-O3"]),
    Extension("cython_ext._bloom", ["cython_ext/_bloom.pyx"], extra_compile_args=["-O3"]),
    Extension("cython_ext._merge", ["cython_ext/_merge.pyx"], extra_compile_args=["-O3"]),
    Extension("cython_ext._lru", ["cython_ext/_lru.pyx"], extra_compile_args=["-O3"]),
    Extension("cython_ext._scan", ["cython_ext/_scan.pyx"], extra_compile_args=["-O3"]),
    Extension("cython_ext._pointget", ["cython_ext/_pointget.pyx"], extra_compile_args=["-O3"]),
    Extension("cython_ext._memtable", ["cython_ext/_memtable.pyx"], extra_compile_args=["-O3"]),
    Extension("cython_ext._rootrows", ["cython_ext/_rootrows.pyx"], extra_compile_args=["-O3"]),
    Extension("cython_ext._newfile", ["cython_ext/_newfile.pyx"], extra_compile_args=["-O3"]),
    Extension("cython_ext._rowbatch", ["cython_ext/_rowbatch.pyx"], extra_compile_args=["-O3"]),
    Extension("cython_ext._writebatch", ["cython_ext/_writebatch.pyx"], extra_compile_args=["-O3"]),
]

setup(
    ext_modules=cythonize(extensions, language_level=3, compiler_directives={"embedsignature": True}),
)
