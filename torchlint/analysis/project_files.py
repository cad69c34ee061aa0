"""The user's project as files: where a linted file's imports resolve, which of them are the
user's (not installed packages), and their texts and content hashes. Imports no LibCST: the cache
(a warm run checks the hashes of the project files a result read) and the pre-filter (a file
whose triggers stand only in what it imports) ask it without parsing anything. The value model's
summaries of those files are `project.py`'s.
"""

from __future__ import annotations

import os
import re
from typing import Dict, List, Optional, Sequence, Tuple

from torchlint.digest import blake2b
from torchlint.project_root import find_root  # the same root as `torchlint run`'s

_INSTALLED_PARTS = frozenset({"site-packages", "dist-packages", "node_modules", ".tox", ".nox"})
# Import roots that are never the user's: the libraries the value model knows by name.
_LIBRARY_ROOTS = frozenset({
    "torch", "torchvision", "torchaudio", "torchtext", "numpy", "np", "os", "sys", "math", "re", "time",
    "json", "typing", "collections", "itertools", "functools", "argparse", "logging", "random", "copy",
    "pathlib", "tqdm", "shutil", "pickle", "abc", "dataclasses", "warnings", "contextlib", "enum",
    "lightning", "pytorch_lightning", "transformers", "timm", "accelerate", "PIL", "matplotlib",
    "pandas", "scipy", "sklearn", "wandb", "tensorboard", "yaml", "glob", "subprocess",
})
MAX_FILES = 200  # project modules summarised for one linted file's imports (transitively)


def enabled() -> bool:
    return not os.environ.get("TORCHLINT_NO_PROJECT")


def text_digest(text: str) -> str:
    """The content hash of a source text (what cached results and shared parses compare)."""
    return blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


_ROOTS: Dict[str, str] = {}
_MARKED: Dict[str, Optional[str]] = {}  # find_root's memo: the markers of each directory looked at once


def _root_for(path: str) -> str:
    directory = os.path.dirname(os.path.abspath(path))
    root = _ROOTS.get(directory)
    if root is None:
        root = _ROOTS[directory] = find_root(path, _MARKED)
    return root


def _installed(absolute: str) -> bool:
    """A file of an installed package (site-packages, a virtual environment): not a user's
    project, whatever imports it (linting torch's own sources reads each file alone)."""
    parts = absolute.split(os.sep)
    return any(part in _INSTALLED_PARTS for part in parts)


class ProjectFiles:
    """Where the imports of the file at `path` resolve, as for a script of the project: the
    file's directory, the directories it adds to `sys.path` (`added`), the root and its `src/`."""

    def __init__(self, path: str, root: str, added: Sequence[str] = ()) -> None:
        self.path = path
        self.root = root
        directory = os.path.dirname(path)
        seen = []
        for each in [directory, *added, root, os.path.join(root, "src")]:
            each = os.path.normpath(each)
            if each not in seen and os.path.isdir(each) and self._inside(each):
                seen.append(each)
        self.search = seen

    def _inside(self, path: str) -> bool:
        prefix = self.root.rstrip(os.sep) + os.sep
        if path != self.root and not path.startswith(prefix):
            return False
        parts = path[len(prefix):].split(os.sep) if path != self.root else []
        return not any(part in _INSTALLED_PARTS or part.startswith(".venv") or part == "venv" for part in parts)

    def _module_file(self, parts: List[str], level: int) -> Optional[str]:
        if level:
            base = os.path.dirname(self.path)
            for _ in range(level - 1):
                base = os.path.dirname(base)
            bases = [base]
        else:
            bases = self.search
        for base in bases:
            target = os.path.join(base, *parts)
            for candidate in (target + ".py", os.path.join(target, "__init__.py")):
                if os.path.isfile(candidate) and self._inside(os.path.dirname(os.path.abspath(candidate))):
                    return os.path.abspath(candidate)
        return None


_SYS_PATH_TEXT = re.compile(
    r"^[ \t]*sys\.path\.(?:append|insert)\((?:[ \t]*\d+[ \t]*,)?[ \t]*[rR]?['\"]([^'\"\n]+)['\"][ \t]*\)", re.M)


def sys_path_in_text(text: str, directory: str) -> List[str]:
    """The directories a literal `sys.path.append("...")` / `insert(0, "...")` adds, read from
    the text (the pre-filter's view: no tree yet)."""
    if "sys.path" not in text:
        return []
    return [d if os.path.isabs(d) else os.path.join(directory, d) for d in _SYS_PATH_TEXT.findall(text)]


# `from m import a, b`, `from m import (\n    a,  # note\n    b,\n)` (Black's style), `from m import a, \\\n b`,
# `import m, n as o`: the names are cleaned of comments, backslashes and newlines before use.
_IMPORT_LINE = re.compile(
    r"^[ \t]*(?:from[ \t]+(\.*[\w.]*)[ \t]+import[ \t]+(?:\(([^)]*)\)|((?:[\w., \t*]|\\\n)+))"
    r"|import[ \t]+([\w., \t]+))", re.M)
_IMPORT_NOISE = re.compile(r"#[^\n]*|\\\n|\n")
_TEXTS: Dict[str, Tuple[int, int, str, str]] = {}


def _text_of(path: str) -> Optional[Tuple[str, str]]:
    """(text, content hash) of a project file, read once per process while it is unchanged."""
    try:
        stat = os.stat(path)
    except OSError:
        return None
    known = _TEXTS.get(path)
    if known is not None and known[:2] == (stat.st_mtime_ns, stat.st_size):
        return known[2], known[3]
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError:
        return None
    try:
        from torchlint.source import decode_source

        text = decode_source(data).text
    except Exception:
        text = data.decode("utf-8", "replace")
    digest = text_digest(text)
    _TEXTS[path] = (stat.st_mtime_ns, stat.st_size, text, digest)
    return text, digest


ABSENT = "absent"  # the digest of a file that does not exist


def digest_of(path: str) -> str:
    """The content hash of a file now (ABSENT when there is none): a cached result that read it
    (or looked for it) holds only while this is unchanged."""
    found = _text_of(path)
    return ABSENT if found is None else found[1]


def imported_text(path: Optional[str], text: str) -> Tuple[str, Dict[str, str]]:
    """The text of the project files `text` (the file at `path`) imports, transitively: what
    the pre-filter must search besides the file itself, and those files' content hashes. Empty
    when nothing is imported from the project (or the layer is off)."""
    if not path or path.startswith("<") or path == "-" or not enabled() or "import" not in text:
        return "", {}
    absolute = os.path.abspath(path)
    if _installed(absolute) or not os.path.isfile(absolute):
        return "", {}
    seen = {absolute}
    pending = [(absolute, text)]
    parts: List[str] = []
    digests: Dict[str, str] = {}
    while pending and len(seen) <= MAX_FILES:
        current, content = pending.pop()
        view = ProjectFiles(current, _root_for(current), sys_path_in_text(content, os.path.dirname(current)))
        for match in _IMPORT_LINE.finditer(content):
            module, parenthesized, names, plain = match.groups()
            if module is not None:
                names = _IMPORT_NOISE.sub(" ", parenthesized if parenthesized is not None else names)
            candidates: List[Tuple[List[str], int]] = []
            if plain is not None:
                for item in plain.split(","):
                    dotted = item.strip().split()[0] if item.strip() else ""
                    if dotted:
                        candidates.append((dotted.split("."), 0))
            else:
                level = len(module) - len(module.lstrip("."))
                base = [p for p in module[level:].split(".") if p]
                if not base and level == 0:
                    continue
                candidates.append((base, level))
                for item in names.split(","):
                    word = item.strip().split()[0] if item.strip() else ""
                    if word.isidentifier():
                        candidates.append((base + [word], level))
            for dotted, level in candidates:
                if not dotted and not level:
                    continue
                if level == 0 and dotted[0] in _LIBRARY_ROOTS:
                    continue
                for size in range(len(dotted), 0 if level == 0 else -1, -1):
                    file = view._module_file(dotted[:size], level)
                    if file is not None:
                        if file not in seen:
                            seen.add(file)
                            found = _text_of(file)
                            if found is not None:
                                parts.append(found[0])
                                digests[file] = found[1]
                                pending.append((file, found[0]))
                        break
                else:
                    if current == absolute and level == 0 and dotted:
                        # Not the user's today (an installed package, or missing): a `model.py`
                        # created next to the file later must still invalidate its cached result.
                        digests.setdefault(os.path.join(os.path.dirname(current), dotted[0] + ".py"), ABSENT)
    return "\n".join(parts), digests
