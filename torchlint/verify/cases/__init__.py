"""Confirmation cases, one module per rule: `tlNNN.py` exporting `CASES = [Case(...), ...]`."""

from __future__ import annotations

import importlib
import pkgutil
import re
from typing import Dict, Iterable, List, Optional

from torchlint.verify.case import Case

_CASE_MODULE = re.compile(r"^tl\d{3}\w*$")


def case_modules() -> Dict[str, List[Case]]:
    """{module name: its CASES}, for every `tl*.py` module in this package."""
    modules: Dict[str, List[Case]] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if _CASE_MODULE.match(info.name):
            module = importlib.import_module(f"{__name__}.{info.name}")
            modules[info.name] = list(getattr(module, "CASES", []))
    return modules


def all_cases(codes: Optional[Iterable[str]] = None) -> List[Case]:
    """Every rule's cases, ordered by rule code; with `codes`, only the cases whose rule starts
    with one of them (so "TL00" selects TL001-TL009)."""
    cases = [case for module_cases in case_modules().values() for case in module_cases]
    if codes is not None:
        prefixes = tuple(code.upper() for code in codes)
        cases = [case for case in cases if case.rule.startswith(prefixes)]
    return sorted(cases, key=lambda case: case.rule)  # stable: keeps each module's order
