"""Start-up: the compiled methods of LibCST's node classes, kept between runs like bytecode.

LibCST's 170 node classes are dataclasses, and `dataclasses` writes the source of each generated
method (`__init__`, `__eq__`, `__repr__`, `__hash__`, the frozen `__setattr__`, ...) and compiles
it at every import: about 620 functions, 70-80 ms of the 130 ms that `import libcst` takes, in
every run (a pre-commit hook, an editor's flake8 on each save). A generated method's code object
depends only on its source text, so `compiled_dataclass_methods()` keeps the code objects in one
file beside torchlint's bytecode (`torchlint/__pycache__/dataclass-methods.<tag>.marshal`, the
interpreter's cache tag and bytecode magic number in it) and later imports execute them instead
of compiling the same text again: the functions are built exactly as `dataclasses` builds them,
from the same code, in the same namespace.

The file is written when something new was compiled and bytecode may be written (not under
`PYTHONDONTWRITEBYTECODE` / `-B`, as Python's own .pyc files); a missing, unreadable, stale or
corrupt file just means compiling as usual. Only the interpreters whose `dataclasses` has the
`_create_fn` checked below (CPython 3.9-3.12) take this path; others import as usual.
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from typing import Dict, Iterator

_SIGNATURE = ("name", "args", "body", "globals", "locals", "return_type")


def cache_file() -> str:
    folder = os.path.join(os.path.dirname(os.path.abspath(__file__)), "__pycache__")
    return os.path.join(folder, f"dataclass-methods.{sys.implementation.cache_tag}.marshal")


def _magic() -> bytes:
    import _frozen_importlib_external

    return bytes(_frozen_importlib_external.MAGIC_NUMBER)


_LOADED: Dict[str, Dict[bytes, object]] = {}  # path -> its table, read once per process


def _load(path: str) -> Dict[bytes, object]:
    table = _LOADED.get(path)
    if table is None:
        table = _LOADED[path] = _read_table(path)
    return table


def _read_table(path: str) -> Dict[bytes, object]:
    import marshal

    try:
        with open(path, "rb") as handle:
            # `marshal.load(handle)` reads through the file object a few bytes at a time: 16-21 ms
            # for this table, against 1-3 ms for one read and `loads`.
            magic, table = marshal.loads(handle.read())
    except Exception:  # missing, unreadable, truncated or from another format: compile as usual
        return {}
    return table if magic == _magic() and type(table) is dict else {}


def _save(path: str, table: Dict[bytes, object]) -> None:
    import marshal

    temporary = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(temporary, "wb") as handle:
            marshal.dump((_magic(), table), handle)
        os.replace(temporary, path)  # concurrent runs: each file is whole, the last one stays
    except OSError:  # a read-only installation: the next run compiles again
        try:
            os.unlink(temporary)
        except OSError:
            pass


def _supported(create_fn) -> bool:
    code = getattr(create_fn, "__code__", None)
    return code is not None and code.co_varnames[:len(_SIGNATURE)] == _SIGNATURE and sys.version_info < (3, 13)


@contextmanager
def compiled_dataclass_methods() -> Iterator[None]:
    """Within this block, dataclasses built by imports reuse the code objects kept on disk, and
    the garbage collector is off: importing LibCST and the rules makes objects that live as long
    as the process, which some sixty collections would only rescan (about 8 ms). When the block
    imported something, what exists then is frozen out of later collections (`gc.freeze()`); a
    block that imports nothing new (the flake8 plugin enters one for every file) freezes nothing,
    so no file's leftovers are kept for good."""
    import gc

    collecting = gc.isenabled()
    modules = len(sys.modules)
    gc.disable()
    try:
        with _kept_dataclass_code():
            yield
    finally:
        if len(sys.modules) > modules:
            gc.freeze()
        if collecting:
            gc.enable()


@contextmanager
def _kept_dataclass_code() -> Iterator[None]:
    import dataclasses

    original = getattr(dataclasses, "_create_fn", None)
    if not _supported(original):
        yield
        return
    from torchlint.digest import blake2b

    path = cache_file()
    known = _load(path)  # shared by every block of this process: what one compiles, later ones reuse
    made: Dict[bytes, object] = {}
    missing = dataclasses.MISSING

    # dataclasses._create_fn of CPython 3.9-3.12, with the compiled text looked up first.
    def _create_fn(name, args, body, *, globals=None, locals=None, return_type=missing):
        if locals is None:
            locals = {}
        return_annotation = ""
        if return_type is not missing:
            locals["_return_type"] = return_type
            return_annotation = "->_return_type"
        args = ",".join(args)
        body = "\n".join(f"  {b}" for b in body)
        txt = f" def {name}({args}){return_annotation}:\n{body}"
        local_vars = ", ".join(locals.keys())
        txt = f"def __create_fn__({local_vars}):\n{txt}\n return {name}"
        key = blake2b(txt.encode("utf-8"), digest_size=16).digest()
        code = known.get(key)
        if code is None:
            # dont_inherit: compiled as `exec(txt)` in dataclasses compiles it, without this
            # module's `from __future__ import annotations` (the annotations stay objects).
            code = made[key] = compile(txt, "<string>", "exec", dont_inherit=True)
        ns: dict = {}
        exec(code, globals, ns)
        return ns["__create_fn__"](**locals)

    dataclasses._create_fn = _create_fn
    try:
        yield
    finally:
        dataclasses._create_fn = original
        known.update(made)
        if made and not sys.dont_write_bytecode:
            _save(path, known)


def import_rules():
    """`torchlint.rules` (and LibCST with it) imported through `compiled_dataclass_methods()`:
    for the linter, and for the paths that need every rule's metadata (SARIF's rule descriptors,
    `--list-rules`, `torchlint rule CODE`). The registry is filled inside the block too: the rule
    modules, and the analysis modules they import, are only imported when it is. Once per
    process: later calls (each `engine.select_rules`) do not enter the block again."""
    global _RULES
    if _RULES is None:
        with compiled_dataclass_methods():
            import torchlint.rules as rules

            rules.all_rules()
        _RULES = rules
    return _RULES


_RULES = None  # torchlint.rules once import_rules() has loaded it
