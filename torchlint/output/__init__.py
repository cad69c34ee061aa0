"""Report formats. Each lives in its own module and is imported only when asked for."""

from __future__ import annotations

import importlib
from typing import Callable, Dict, List, TextIO

from torchlint.finding import FileResult

# name -> "module:function"; the function takes (results, stream, options) and writes the report.
FORMATS: Dict[str, str] = {
    "concise": "torchlint.output.text:write_concise",
    "full": "torchlint.output.text:write_full",
    "json": "torchlint.output.json_format:write_json",
    "json-lines": "torchlint.output.json_lines:write_json_lines",
    "github": "torchlint.output.github:write_github",
    "sarif": "torchlint.output.sarif:write_sarif",
    "grouped": "torchlint.output.grouped:write_grouped",
}


def writer(name: str) -> Callable[[List[FileResult], TextIO, dict], None]:
    module_name, _, function = FORMATS[name].partition(":")
    return getattr(importlib.import_module(module_name), function)
