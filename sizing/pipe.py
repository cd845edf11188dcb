"""Exit codes that survive a reader who stops early (``python -m sizing ... | head -1``).

When the reader of stdout goes away, a write raises ``BrokenPipeError``; letting it end the
command loses the command's own exit code (an infeasible plan must stay 1 behind a pipe, and
``set -o pipefail`` scripts rely on it). :func:`run_main` swaps stdout for a writer that drops
output once the pipe is closed, so the command runs to its end and returns its real code.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable
from typing import Any, NoReturn, TextIO


class ReaderGoneSafe:
    """A text stream that forwards to ``stream`` until its reader has gone, then drops writes."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.reader_gone = False

    def _gone(self) -> None:
        self.reader_gone = True
        # Point the file descriptor at /dev/null so the interpreter's final flush stays quiet.
        with contextlib.suppress(OSError, ValueError):  # not a real file (a test's StringIO)
            os.dup2(os.open(os.devnull, os.O_WRONLY), self._stream.fileno())

    def write(self, text: str) -> int:
        if not self.reader_gone:
            try:
                self._stream.write(text)
            except BrokenPipeError:
                self._gone()
        return len(text)

    def flush(self) -> None:
        if not self.reader_gone:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._gone()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def run_main(main: Callable[[], int]) -> NoReturn:
    """``sys.exit(main())`` with stdout guarded: the exit code is main's, pipe closed or not."""
    guarded = ReaderGoneSafe(sys.stdout)
    sys.stdout = guarded
    try:
        code = main()
    finally:
        guarded.flush()
    sys.exit(code)
