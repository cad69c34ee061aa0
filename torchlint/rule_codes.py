"""The rule codes torchlint knows, read from the rule modules' file names (`rules/tl001_*.py` holds
TL001) without importing them: validating `--select`, `--ignore` and the configuration's codes
must not import LibCST and every rule, which a warm-cache run otherwise never does. A test keeps
the names and the rules' own codes the same."""

from __future__ import annotations

import os
import re
from functools import lru_cache
from typing import Dict, List, Optional

_RULE_FILE = re.compile(r"^(tl\d{3})_\w+\.py$")
# The documentation site (mkdocs.yml's site_url): each rule has a page at rules/<CODE>/, generated from
# the rule by scripts/generate_rule_docs.py.
DOCS_URL = "https://torchlint.github.io/torchlint"


@lru_cache(maxsize=1)
def rule_modules() -> Dict[str, str]:
    """Each rule code and the name of the module that holds it (`TL001`: `tl001_inplace_...`)."""
    folder = os.path.join(os.path.dirname(os.path.abspath(__file__)), "rules")
    try:
        names = os.listdir(folder)
    except OSError:
        names = []
    modules = {match.group(1).upper(): match.group(0)[:-3] for match in map(_RULE_FILE.match, names) if match}
    if not modules:  # an installation that keeps no sources (zipped, frozen): ask the rules themselves
        from torchlint.rules import all_rules

        modules = {rule.code: type(rule).__module__.rsplit(".", 1)[-1] for rule in all_rules()}
    return dict(sorted(modules.items()))


def known_rule_codes() -> List[str]:
    return list(rule_modules())


def rule_url(code: str) -> Optional[str]:
    """The rule's page on the documentation site (what `torchlint rule CODE` prints), None for a
    code that is no rule (the TL9xx diagnostics)."""
    code = code.upper()
    return f"{DOCS_URL}/rules/{code}/" if code in rule_modules() else None
