"""Replacing a file's content atomically, so that a reader (or an interrupted run) sees either the
old bytes or the new ones, never a half-written file.

The new content goes to a temporary file in the same directory (same file system, so the final
`os.replace` is a rename), is flushed and fsynced, gets the original file's permission bits, and
replaces the original only if the original still holds the bytes the fix was computed from.
"""

from __future__ import annotations

import os
import signal
import stat
import tempfile
import threading
from contextlib import contextmanager
from typing import Callable, Iterator, Optional


class WriteRefused(Exception):
    """The file was left as it was; the message says why (user-facing)."""


class ReadOnlyFile(WriteRefused):
    pass


class ConcurrentChange(WriteRefused):
    pass


# Called with the target path after the temporary file is complete and before the on-disk content
# is compared; tests use it to simulate another program changing the file in between.
before_compare: Optional[Callable[[str], None]] = None


def is_read_only(path: str) -> bool:
    """No write permission for us, or (as root, where `os.access` always says yes) no write bit."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not os.access(path, os.W_OK) or not mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)


@contextmanager
def _sigint_deferred() -> Iterator[None]:
    """Keep SIGINT pending while the temporary file is created and renamed, so that an interrupt
    cannot leave a stray temporary file behind (the rename itself is atomic either way)."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "pthread_sigmask"):
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def write_atomic(path: str, data: bytes, expected: Optional[bytes] = None) -> None:
    """Replace the content of `path` with `data`.

    `expected` is the content the new data was computed from; when the file no longer holds it,
    nothing is written and `ConcurrentChange` is raised. A symbolic link is followed (the link
    stays a link). Raises `ReadOnlyFile` for a file without write permission and `OSError` for
    other failures; in every failure case the original file is untouched.
    """
    target = os.path.realpath(path)
    try:
        info = os.stat(target)
    except OSError as error:
        raise WriteRefused(f"cannot write file: {error.strerror or error}") from None
    if is_read_only(target):
        raise ReadOnlyFile("file is read-only")
    directory = os.path.dirname(target) or "."
    with _sigint_deferred():
        fd, temporary = tempfile.mkstemp(
            dir=directory, prefix="." + os.path.basename(target) + ".", suffix=".torchlint-tmp"
        )
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
                os.chmod(temporary, stat.S_IMODE(info.st_mode))
                if hasattr(os, "chown"):
                    try:
                        os.chown(temporary, info.st_uid, info.st_gid)
                    except OSError:
                        pass  # not permitted for other owners; the mode bits still match
            if before_compare is not None:
                before_compare(target)
            if expected is not None:
                with open(target, "rb") as handle:
                    current = handle.read()
                if current != expected:
                    raise ConcurrentChange("file changed on disk while it was being fixed")
            os.replace(temporary, target)
            temporary = None
            _fsync_directory(directory)
        finally:
            if temporary is not None:
                try:
                    os.unlink(temporary)
                except OSError:
                    pass


def _fsync_directory(directory: str) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
