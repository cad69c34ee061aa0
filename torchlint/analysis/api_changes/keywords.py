"""API changes: see `torchlint.analysis.api_changes` for the schema."""

from __future__ import annotations

from typing import List

from torchlint.analysis.api_changes import ApiChange

CHANGES: List[ApiChange] = []
