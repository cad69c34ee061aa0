"""The rule registry: every module `tlNNN_<name>.py` in this package holds one rule."""

from __future__ import annotations

import importlib
import pkgutil
import re
from functools import lru_cache
from typing import Dict, List, Optional

from torchlint.rules.base import Rule

_RULE_MODULE = re.compile(r"^tl\d{3}_\w+$")


@lru_cache(maxsize=None)
def _registry() -> Dict[str, Rule]:
    rules: Dict[str, Rule] = {}
    for info in pkgutil.iter_modules(__path__):
        if not _RULE_MODULE.match(info.name):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, Rule) and value is not Rule \
                    and value.__module__ == module.__name__:
                rules[value.code] = value()
    return dict(sorted(rules.items()))


def all_rules() -> List[Rule]:
    return list(_registry().values())


def get_rule(code: str) -> Optional[Rule]:
    return _registry().get(code.upper())


def all_codes() -> List[str]:
    return list(_registry())
