"""Reading source bytes the way Python does: PEP 263 coding cookies and a UTF-8 BOM.

The decoded text keeps its original line endings; `SourceFile` remembers the encoding and BOM so
that a fix can be written back byte-compatible with the original.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass

# PEP 263: the cookie must be in a comment on line 1 or 2.
_COOKIE_RE = re.compile(rb"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)")
_BLANK_OR_COMMENT_RE = re.compile(rb"^[ \t\f]*(?:[#\r\n]|$)")


class SourceError(Exception):
    """The bytes cannot be turned into Python source text. The message is user-facing; `row` and
    `column` (1-based, the column in characters) locate the offending byte where there is one."""

    def __init__(self, message: str, row: int = 1, column: int = 1) -> None:
        super().__init__(message)
        self.row = row
        self.column = column


def _position(data: bytes, offset: int) -> tuple:
    """(row, column) of byte `offset`, both 1-based; the column counts the characters before it on
    its line (bytes that do not decode count one each)."""
    start = data.rfind(b"\n", 0, offset) + 1
    prefix = data[start:offset].decode("utf-8", "replace")
    return data.count(b"\n", 0, offset) + 1, len(prefix) + 1


@dataclass
class SourceFile:
    text: str
    encoding: str = "utf-8"
    bom: bool = False
    newline: str = "\n"

    def encode(self, text: str) -> bytes:
        data = text.encode(self.encoding)
        return codecs.BOM_UTF8 + data if self.bom else data


def detect_newline(text: str) -> str:
    index = text.find("\n")
    if index > 0 and text[index - 1] == "\r":
        return "\r\n"
    if index == -1 and "\r" in text:
        return "\r"
    return "\n"


def _declared_encoding(data: bytes) -> str | None:
    lines = data.split(b"\n", 2)
    for number, line in enumerate(lines[:2]):
        match = _COOKIE_RE.match(line)
        if match:
            return match.group(1).decode("ascii", "replace")
        if number == 0 and not _BLANK_OR_COMMENT_RE.match(line):
            return None  # a cookie on line 2 only counts when line 1 is blank or a comment
    return None


def decode_source(data: bytes) -> SourceFile:
    bom = data.startswith(codecs.BOM_UTF8)
    if bom:
        data = data[len(codecs.BOM_UTF8):]
    if b"\x00" in data:  # a binary file: say so before any encoding question (Python refuses NUL too)
        row, column = _position(data, data.index(b"\x00"))
        raise SourceError(f"source contains a NUL byte (line {row}, column {column}): a binary file, not "
                          "Python source", row, column)
    declared = _declared_encoding(data)
    encoding = "utf-8"
    if declared is not None:
        try:
            encoding = codecs.lookup(declared).name
        except LookupError:
            raise SourceError(f"unknown encoding {declared!r} in the coding cookie") from None
        if bom and encoding != "utf-8":
            raise SourceError(f"a UTF-8 BOM contradicts the coding cookie {declared!r}")
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as exc:
        row, column = _position(data, exc.start)
        raise SourceError(
            f"not valid {encoding}: byte 0x{data[exc.start]:02x} at line {row}, column {column} "
            f"({exc.reason}); declare the encoding with a coding cookie or re-save the file as UTF-8",
            row, column,
        ) from None
    if "\x00" in text:  # a NUL spelled by a multi-byte encoding
        row = text.count("\n", 0, text.index("\x00")) + 1
        raise SourceError(f"source contains a NUL byte (line {row})", row)
    return SourceFile(text=text, encoding=encoding, bom=bom, newline=detect_newline(text))
