"""`# noqa` with flake8's exact semantics, so the CLI and the flake8 plugin always agree.

- The comment is searched in the reported line; lines joined by a token that spans them (a
  triple-quoted string) share one noqa text, as flake8's `_noqa_line_mapping` does.
- `# noqa` alone silences everything; `# noqa: TL0` silences every code starting with TL0.
- A line that is only `# flake8: noqa` (or `# torchlint: noqa`) silences the whole file.
"""

from __future__ import annotations

import io
import re
import tokenize
from typing import Dict, List, Optional

# Copied from flake8.defaults (7.x) so that linting does not import flake8.
NOQA_INLINE = re.compile(r"# noqa(?::[\s]?(?P<codes>([A-Z]+[0-9]+(?:[,\s]+)?)+))?", re.IGNORECASE)
NOQA_FILE = re.compile(r"\s*# (?:flake8|torchlint)[:=]\s*noqa", re.I)
_CODE_SEPARATOR = re.compile(r"[,\s]")


class Suppressions:
    def __init__(self, text: str) -> None:
        self.lines = text.splitlines(keepends=True)
        self.file_ignored = "noqa" in text.lower() and any(NOQA_FILE.match(line) for line in self.lines)
        self._has_noqa = "noqa" in text.lower()
        self._mapping: Optional[Dict[int, str]] = None
        self._text = text

    def _noqa_text(self, row: int) -> str:
        if self._mapping is None:
            self._mapping = self._multiline_mapping()
        text = self._mapping.get(row)
        if text is None:  # flake8 then falls back to the physical line
            text = self.lines[row - 1] if 0 < row <= len(self.lines) else ""
        return text

    def _multiline_mapping(self) -> Dict[int, str]:
        """flake8's `FileProcessor._noqa_line_mapping`, token for token."""
        mapping: Dict[int, str] = {}
        lines = self.lines
        try:
            min_line, max_line = len(lines) + 2, -1
            for token in tokenize.generate_tokens(io.StringIO(self._text).readline):
                if token.type in (tokenize.ENDMARKER, tokenize.DEDENT):
                    continue
                min_line = min(min_line, token.start[0])
                max_line = max(max_line, token.end[0])
                if token.type in (tokenize.NL, tokenize.NEWLINE):
                    joined = "".join(lines[min_line - 1:max_line])
                    for row in range(min_line, max_line + 1):
                        mapping[row] = joined
                    min_line, max_line = len(lines) + 2, -1
        except (tokenize.TokenError, SyntaxError):
            return {}
        return mapping

    def is_suppressed(self, code: str, row: int) -> bool:
        if self.file_ignored:
            return True
        if not self._has_noqa:
            return False
        match = NOQA_INLINE.search(self._noqa_text(row))
        if match is None:
            return False
        codes = match.group("codes")
        if codes is None:
            return True
        listed: List[str] = [c for c in _CODE_SEPARATOR.split(codes) if c.strip()]
        return code in listed or code.startswith(tuple(listed))
