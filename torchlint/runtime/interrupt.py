"""Ctrl-C is never lost.

CPython runs a Python-level SIGINT handler at the next "safe point" of whatever Python code is
executing. When that code is a callback the interpreter calls from C — a weakref callback (a
`WeakSet`'s `_remove`, a `WeakValueDictionary`'s), a `__del__` — the KeyboardInterrupt the default
handler raises there is printed as "Exception ignored in: ..." and dropped: the script runs on.
Plain scripts rarely have such callbacks; an instrumented run has many (ours).

So, while the script runs, SIGINT goes to `Interrupts.handler`: it raises KeyboardInterrupt at
once when the interrupted frame is an ordinary frame (the script's, a library's), exactly as
Python's own handler would; when the frame is one of ours or a callback the interpreter would
swallow the exception in, it only records the interrupt and has the signal delivered again a few
milliseconds later (`_thread.interrupt_main`), until it lands on a frame where raising reaches the
script. A script that installs a SIGINT handler of its own keeps it (ours is only the default).
"""

from __future__ import annotations

import _thread
import os
import signal
import threading
import time
from typing import Any, Optional

_TORCHLINT_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Files whose functions the interpreter calls from C and whose exceptions it only prints.
_CALLBACK_FILES = ("_weakrefset.py", "weakref.py")
RETRY_SECONDS = 0.005
GIVE_UP_SECONDS = 0.5  # after this long without a safe frame, raise wherever we are


class Interrupts:
    def __init__(self, boundary_code: Any = None) -> None:
        self.boundary_code = boundary_code  # the launcher's frame: below it nothing is the script's
        self.pending_since: Optional[float] = None
        self.deferred = 0
        self._saved: Any = None
        self._installed = False

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        try:
            current = signal.getsignal(signal.SIGINT)
        except (ValueError, OSError):
            return
        if current is not signal.default_int_handler:  # ignored (nohup, a background job) or custom
            return
        self._saved = current
        signal.signal(signal.SIGINT, self.handler)
        self._installed = True

    def uninstall(self) -> None:
        if not self._installed:
            return
        self._installed = False
        try:
            if signal.getsignal(signal.SIGINT) == self.handler:
                signal.signal(signal.SIGINT, self._saved)
        except (ValueError, OSError):
            pass

    def handler(self, signum: int, frame: Any) -> None:
        now = time.monotonic()
        if self.pending_since is None:
            self.pending_since = now
        if self._unsafe(frame) and now - self.pending_since < GIVE_UP_SECONDS:
            self.deferred += 1
            timer = threading.Timer(RETRY_SECONDS, _thread.interrupt_main, (signal.SIGINT,))
            timer.daemon = True
            timer.start()
            return
        self.pending_since = None
        raise KeyboardInterrupt

    def _unsafe(self, frame: Any) -> bool:
        """Whether raising in `frame` could be swallowed or leave our bookkeeping half done: a frame
        of torchlint's own (up to the launcher's), or of a weakref callback / `__del__`, anywhere
        between the interrupted frame and the first frame of the script."""
        depth = 0
        while frame is not None and depth < 64:
            code = frame.f_code
            if code is self.boundary_code:
                return False
            filename = code.co_filename
            if code.co_name == "__del__" or filename.endswith(_CALLBACK_FILES):
                return True
            if filename.startswith(_TORCHLINT_DIR + os.sep):
                return True
            frame = frame.f_back
            depth += 1
        return False
