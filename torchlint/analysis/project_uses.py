"""What the other files of the project do with instances of a class of the linted file: the
optimizer `train.py` builds over `Net().parameters()`, the `.to(device)` it moves one with. A rule
about the class (TL101, TL102) is certain of its harm only when some file does that.

The files looked at are those of the project directories (the linted file's own, the directories
it adds to `sys.path`, the project root and its `src/`), at most 200; a file is parsed only when
its text names the class and every word the caller asks for, and every file read is recorded for
the cache key (`project.read`)."""

from __future__ import annotations

import os
from typing import Callable, List, Optional, Sequence, Tuple

import libcst as cst

MAX_FILES = 200


class Shown:
    """A call of another project file, as a message quotes it."""

    def __init__(self, source: str) -> None:
        self.source = source


def instance_call(sem, klass: cst.ClassDef, words: Sequence[str],
                  match: Callable[[object, cst.Call, Callable[[cst.BaseExpression], bool]], bool]
                  ) -> Optional[Tuple[Shown, str]]:
    """(the first call of another project file for which `match(other_semantic, call, is_instance)`
    holds, "train.py:12"), where `is_instance(expr)` says whether `expr` is an instance of `klass`
    as that file's value model knows it (built from the class imported from this file). None when
    no file has one, or the project layer is off."""
    project = getattr(sem, "project", None)
    if klass is None or project is None or not getattr(project, "path", None):
        return None
    from torchlint.analysis import project as layer  # noqa: PLC0415 - the parse cache, only here

    own = project.display(project.path)
    origins = {f"{own}:{layer._position(sem, klass)[0]}", f"{own}:{layer._position(sem, klass.name)[0]}"}
    name = klass.name.value
    for file in _files(project):
        text = layer._text_of(file)
        if text is None:
            continue
        project.read[file] = text[1]
        if name not in text[0] or not all(word in text[0] for word in words):
            continue
        parsed = layer._read(file)
        other = parsed.semantic if parsed is not None else None
        if other is None:
            continue
        if other.project is not None:
            project.read.update(other.project.read)

        def is_instance(expr: cst.BaseExpression, other=other) -> bool:
            owner = other.values.of(expr)
            return owner.module is not None and owner.module.origin in origins

        for call in other.index.nodes(cst.Call):
            if match(other, call, is_instance):
                line, column = layer._position(other, call)
                where = f"{project.display(file)}:{line}"
                project.origins[where] = (file, line, column)
                return Shown(other.source(call)), where
    return None


def _files(project) -> List[str]:
    seen: List[str] = []
    for directory in project.search:
        try:
            names = sorted(os.listdir(directory))
        except OSError:
            continue
        for entry in names:
            file = os.path.join(directory, entry)
            if entry.endswith(".py") and file != project.path and file not in seen and os.path.isfile(file):
                seen.append(file)
    return seen[:MAX_FILES]


def quoted(shown: Shown, limit: int = 40) -> str:
    text = " ".join(shown.source.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


__all__ = ["Shown", "instance_call", "quoted"]
