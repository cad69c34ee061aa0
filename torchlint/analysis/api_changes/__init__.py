"""The table of PyTorch API changes (1.x → 2.x drift): what was removed, deprecated or changed,
since when, what happens on the current release, and what replaces it.

Knowledge about torch's API is data: every entry carries a `Check`, a snippet whose outcome on the
installed torch proves the entry's claim (`torchlint --verify` runs them all, so a wrong entry shows
as REFUTED instead of shipping). Entries about packages that cannot be installed beside the pinned
CPU torch (torchvision, torchtext) say so with `checked="source"` and name the release whose sources
were read.

Nothing here imports torch. The entries live in the modules of this package, one per area and
owner; `CHANGES` is all of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Tuple

# What kind of API an entry is about.
FUNCTION = "function"  # a callable reached by qualified name: torch.solve
MODULE = "module"  # an importable module: torch._six
ATTRIBUTE = "attribute"  # a non-callable name: torch.testing.assert_allclose is a FUNCTION; a class is a FUNCTION too
METHOD = "method"  # a method of a value the analysis must recognise: iter(loader).next()
KEYWORD = "keyword"  # a keyword argument of a function: pretrained= of torchvision builders
DEFAULT = "default"  # the default of a parameter changed: torch.load(weights_only=)

# What happens on the current release when the old API is used.
RAISES = "raises"  # an exception (AttributeError, ModuleNotFoundError, RuntimeError, ...)
WARNS = "warns"  # a warning (FutureWarning / UserWarning / DeprecationWarning) and the same result
CHANGED = "changed"  # runs, but means something else than it did (a default flipped)
DOCS = "docs"  # deprecated in the documentation only: runs silently and computes the same


@dataclass(frozen=True)
class Check:
    """How `--verify` proves an entry's claim on the installed torch.

    `snippet` uses the old API; `outcome` is RAISES/WARNS/CHANGED as in the entry; `match` is a
    substring of the exception or warning text (for CHANGED, `expect` is a Python expression that is
    True after the snippet ran). `replacement_snippet`, when given, must run without that outcome:
    it shows the replacement works. `checked` is "torch" (run on the installed torch) or "source"
    (read in the released sources named by `source`, e.g. "torchvision 0.29.1 torchvision/transforms/
    transforms.py"; `--verify` then only reports the entry as source-checked).
    """

    snippet: str
    match: str = ""
    replacement_snippet: str = ""
    expect: str = ""
    checked: str = "torch"
    source: str = ""
    line: int = 0  # the line of `snippet` that uses the old API (where a rule reports); 0: the last line


@dataclass(frozen=True)
class ApiChange:
    api: str  # the qualified name: "torch.solve", "torch._six", "torch.utils.data.DataLoader.__iter__().next"
    kind: str  # FUNCTION, MODULE, ATTRIBUTE, METHOD, KEYWORD, DEFAULT
    outcome: str  # RAISES, WARNS, CHANGED: on the current release
    deprecated_in: Optional[str]  # "1.9"; None when never formally deprecated
    changed_in: Optional[str]  # the release that removed it or changed the default; None: still only deprecated
    error: str  # what the current release says or does, as measured: "RuntimeError: This function was deprecated since version 1.9 and is now removed"
    replacement: str  # what to write instead, in one phrase; "" when nothing replaces it
    check: Check
    keyword: str = ""  # for KEYWORD/DEFAULT: the parameter's name
    exact_fix: bool = False  # the replacement computes the same for every call the rule may rewrite
    notes: str = ""  # semantics that differ (argument order, upper/lower default), for the docs

    @property
    def error_type(self) -> str:
        """The exception or warning class `error` starts with ("RuntimeError"), or ""."""
        head = self.error.split(" ", 1)[0]
        return head[:-1] if head.endswith(":") else ""

    @property
    def error_text(self) -> str:
        """`error` after its class: the message as the current release prints it."""
        return self.error[len(self.error_type) + 2:] if self.error_type else ""

    @property
    def headline(self) -> str:
        """The first sentence of `error`, at most 100 characters, for a one-line message."""
        text = self.error
        cut = text.find(". ")
        text = text[: cut + 1] if 0 < cut else text
        return text if len(text) <= 100 else text[:99] + "…"
    on_reference: bool = False  # a mere reference (not only a call) has the outcome: AttributeError, a removed class
    rename: str = ""  # the qualified name that takes the same arguments (a drop-in rename the fix may write)


def _collect() -> Tuple[ApiChange, ...]:
    from torchlint.analysis.api_changes import keywords, load, removed  # noqa: PLC0415 - data modules

    return tuple(removed.CHANGES) + tuple(keywords.CHANGES) + tuple(load.CHANGES)


CHANGES: Tuple[ApiChange, ...] = _collect()
BY_API: Dict[str, ApiChange] = {change.api: change for change in CHANGES}

# The torch on which the `checked="torch"` claims were last verified (`torchlint --verify`).
CHECKED_ON = "torch 2.13.0+cpu"
