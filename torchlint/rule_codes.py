"""The rule codes torchlint knows, read from the rule modules' file names (`rules/tl001_*.py` holds
TL001) without importing them: validating `--select`, `--ignore` and the configuration's codes
must not import LibCST and every rule, which a warm-cache run otherwise never does. A test keeps
the names and the rules' own codes the same."""

from __future__ import annotations

import os
import re
from functools import lru_cache
from typing import List

_RULE_FILE = re.compile(r"^(tl\d{3})_\w+\.py$")


@lru_cache(maxsize=1)
def known_rule_codes() -> List[str]:
    folder = os.path.join(os.path.dirname(os.path.abspath(__file__)), "rules")
    try:
        names = os.listdir(folder)
    except OSError:
        names = []
    codes = sorted({match.group(1).upper() for match in map(_RULE_FILE.match, names) if match})
    if not codes:  # an installation that keeps no sources (zipped, frozen): ask the rules themselves
        from torchlint.rules import all_codes

        codes = all_codes()
    return codes
