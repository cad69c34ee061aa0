"""The signature table (`signatures.json`, made from the installed torch by `make_signatures`):
the parameters of every public torch callable that has a Python signature, read lazily.

No torch here. `load()` reads the file once per process, on the first file that calls something
under `torch.` (TL216's candidates); `lookup(qualified_name)` gives a `Signature` for a table
entry or one of its public aliases.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Dict, FrozenSet, List, Optional, Tuple

TABLE = Path(__file__).with_name("signatures.json")


@dataclass(frozen=True)
class Param:
    name: str
    default: Optional[str]  # the recorded default ("None", "0.1", "…"), None: required

    @property
    def required(self) -> bool:
        return self.default is None


@dataclass(frozen=True)
class Signature:
    text: str
    positional_only: Tuple[Param, ...]
    positional: Tuple[Param, ...]  # positional-only and positional-or-keyword, in order
    keyword_only: Tuple[Param, ...]
    var_positional: str  # "" when there is no *args
    var_keyword: str  # "" when there is no **kwargs
    key: str = ""  # the table entry: torch.nn.modules.conv.Conv2d
    flags: str = ""  # k: refuses unknown keywords, p: extra positionals, r: missing required; o: from an overload
    group: str = ""

    @property
    def keywords(self) -> Tuple[str, ...]:
        """The names a keyword argument may have."""
        only = {p.name for p in self.positional_only}
        return tuple(p.name for p in self.positional if p.name not in only) + tuple(p.name for p in self.keyword_only)

    @property
    def required_positional(self) -> Tuple[Param, ...]:
        return tuple(p for p in self.positional if p.required)

    @property
    def short_name(self) -> str:
        """`Conv2d`, `ReduceLROnPlateau`, `clip_grad_norm_`."""
        return self.key.rsplit(".", 1)[-1]


def parse(text: str, key: str = "", flags: str = "", group: str = "") -> Signature:
    inner = text.strip()[1:-1]
    tokens = [t.strip() for t in inner.split(", ")] if inner.strip() else []
    before_slash: List[Param] = []
    positional: List[Param] = []
    keyword_only: List[Param] = []
    var_positional = var_keyword = ""
    keyword_mode = False
    for token in tokens:
        if token == "/":
            before_slash = list(positional)
            continue
        if token == "*":
            keyword_mode = True
            continue
        if token.startswith("**"):
            var_keyword = token[2:]
            continue
        if token.startswith("*"):
            var_positional = token[1:]
            keyword_mode = True
            continue
        name, equals, default = token.partition("=")
        param = Param(name, default if equals else None)
        (keyword_only if keyword_mode else positional).append(param)
    return Signature(text, tuple(before_slash), tuple(positional), tuple(keyword_only), var_positional,
                     var_keyword, key, flags, group)


@lru_cache(maxsize=1)
def load() -> Dict[str, object]:
    """The stored table (read once per process)."""
    with TABLE.open(encoding="utf-8") as handle:
        return json.load(handle)


def torch_version() -> str:
    return str(load().get("torch", "?"))


@lru_cache(maxsize=None)
def _entry(key: str) -> Optional[Signature]:
    row = load()["entries"].get(key)  # type: ignore[union-attr]
    if row is None:
        return None
    text, flags, group = row
    return parse(text, key, flags, group)


def lookup(name: str) -> Optional[Signature]:
    """The signature of the table entry `name` (or of the entry a public alias names)."""
    table = load()
    key = table["aliases"].get(name, name)  # type: ignore[union-attr]
    return _entry(key)


@lru_cache(maxsize=1)
def names() -> FrozenSet[str]:
    """Every qualified name the table answers for (entries and aliases)."""
    table = load()
    return frozenset(table["entries"]) | frozenset(table["aliases"])  # type: ignore[arg-type]


@lru_cache(maxsize=None)
def group_members(group: str) -> Tuple[Signature, ...]:
    """The entries of a group (the siblings a misplaced keyword is looked up in), by name."""
    table = load()
    found = [_entry(key) for key, row in table["entries"].items() if row[2] == group]  # type: ignore[union-attr]
    return tuple(sorted((s for s in found if s is not None), key=lambda s: s.short_name))


def close_spellings(keyword: str, signature: Signature, taken: FrozenSet[str] = frozenset()) -> List[str]:
    """The parameters `keyword` is probably a misspelling of (difflib, or `keyword` + `_...`:
    `kernel` -> `kernel_size`, `norm` -> `norm_type`), not already passed (`taken`); one alone
    when it is far closer than the others (`padding_mod` is `padding_mode`, not `padding`)."""
    import difflib  # noqa: PLC0415 - only when a keyword is rejected

    names = [k for k in signature.keywords if k not in taken and not k.startswith("_")]
    found = difflib.get_close_matches(keyword, names, n=3, cutoff=0.75)
    for name in names:
        if name not in found and len(keyword) >= 4 and name.startswith(keyword + "_"):
            found.append(name)
    if len(found) > 1:
        ratios = sorted(((difflib.SequenceMatcher(None, keyword, name).ratio(), name) for name in found), reverse=True)
        if ratios[0][0] >= 0.9 and ratios[1][0] <= ratios[0][0] - 0.1:
            return [ratios[0][1]]
    return found


@lru_cache(maxsize=1)
def _history_entries() -> Dict[Tuple[str, str], object]:
    from torchlint.analysis.api_changes import BY_API, KEYWORD  # noqa: PLC0415 - the package imports this module's siblings

    return {
        (change.api.split("(", 1)[0].removesuffix(".*"), change.keyword): change
        for change in BY_API.values()
        if change.kind == KEYWORD and change.api.startswith("torch.") and change.api.endswith("=)")
    }


def keyword_history(signature: Signature, name: Optional[str], keyword: str):
    """The API-change table's KEYWORD entry for a keyword an older release of this callable took:
    by the callable (`torch.utils.data.TensorDataset(data_tensor=)`, under its public `name` or its
    key) or by its group (`torch.optim.lr_scheduler.*(verbose=)`); None when there is none."""
    entries = _history_entries()
    for owner in (name, signature.key, signature.group):
        change = entries.get((owner, keyword))
        if change is not None:
            return change
    return None


@lru_cache(maxsize=None)
def by_short_name(short: str) -> Tuple[Signature, ...]:
    """The entries whose callable is named `short` (`ReduceLROnPlateau`, `clip_grad_norm_`): how a
    TypeError's message names it."""
    table = load()
    found = [_entry(key) for key in table["entries"] if key.rsplit(".", 1)[-1] == short]  # type: ignore[union-attr]
    return tuple(s for s in found if s is not None)
