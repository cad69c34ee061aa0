"""TL210: deprecated torch APIs, one confirmation per entry of the API-change table."""

from torchlint.verify.cases._api_table import cases_for

CASES = cases_for("TL210")
