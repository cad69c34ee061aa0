"""The flake8 plugin: `flake8 --extend-select TL` runs torchlint's rules.

flake8 classifies a plugin by its `__init__` parameters: `tree` makes this a tree plugin (flake8
only calls it when `ast.parse` succeeded; otherwise it reports E999 itself). The source is built
from `lines`, never re-read from disk, so that editors linting an unsaved buffer through
`flake8 - --stdin-display-name x.py` see findings for the buffer.

flake8 applies `# noqa` itself, so rules run with `respect_noqa=False` (otherwise the plugin would
hide findings that `--disable-noqa` must show). Columns are 0-based here (flake8 adds 1), so the
plugin and the CLI point at the same character. TL9xx diagnostics (parse failures) are left to
flake8's own E999. No exception ever escapes `run()`: it would abort the whole flake8 run.
flake8 has no severity: the code stays the code (so `--select`/`# noqa` work as for any plugin) and
the severity word starts the message, as in torchlint's own output: `TL201 error: ...`.

Rule selection follows `[tool.torchlint]` `select`/`ignore`/`per-file-ignores` of the nearest
pyproject.toml (flake8's own `--select`/`--extend-ignore` then filter on top, as for any plugin).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterator, List, Sequence, Tuple

from torchlint import __version__

_RULES_BY_CONFIG: dict = {}


def _rules_for(filename: str) -> List[Any]:
    from torchlint.config import ConfigError, load_config
    from torchlint.startup import compiled_dataclass_methods

    with compiled_dataclass_methods():  # LibCST's node classes, built from kept code
        from torchlint.engine import select_rules

    start = filename if filename not in ("-", "stdin", "") and os.path.exists(filename) else os.getcwd()
    try:
        config = load_config(Path(start))
    except ConfigError:
        config = None
    if config is None:
        key: Tuple = (("TL",), ())
    else:
        key = (tuple(config.effective_select), tuple(config.ignores_for(filename)))
    rules = _RULES_BY_CONFIG.get(key)
    if rules is None:
        rules = _RULES_BY_CONFIG[key] = select_rules(key[0], key[1])
    return rules


class TorchLintChecker:
    name = "torchlint"
    version = __version__

    def __init__(self, tree: Any, lines: Sequence[str], filename: str = "-") -> None:
        self.tree = tree  # unused: LibCST parses the same text; the parameter makes this a tree plugin
        self.lines = lines
        self.filename = filename

    def run(self) -> Iterator[Tuple[int, int, str, type]]:
        try:
            findings = self._findings()
        except BaseException as error:  # noqa: B036 - never abort flake8's run
            if isinstance(error, (KeyboardInterrupt, SystemExit)):
                raise
            return
        for finding in findings:
            yield finding.start.row, finding.start.column - 1, f"{finding.code} {finding.severity.value}: {finding.message}", type(self)

    def _findings(self) -> list:
        from torchlint.engine import lint_text

        source = "".join(self.lines)
        if source.startswith("\ufeff"):
            source = source[1:]
        result = lint_text(source, self.filename, _rules_for(self.filename), respect_noqa=False)
        return [finding for finding in result.findings if not finding.is_diagnostic]
