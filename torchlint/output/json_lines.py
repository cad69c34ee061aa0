"""`json-lines`: one JSON object a line, each in the schema of the `json` format's array items."""

from __future__ import annotations

import json
from typing import List, TextIO

from torchlint.finding import FileResult
from torchlint.output.json_format import finding_to_json


def write_json_lines(results: List[FileResult], stream: TextIO, options: dict) -> None:
    for result in results:
        for finding in result.findings:
            stream.write(json.dumps(finding_to_json(finding), ensure_ascii=False) + "\n")
