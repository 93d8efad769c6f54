"""Termination signals as exceptions, so ``finally`` blocks run on them as on Ctrl-C.

Python's default for SIGTERM and SIGHUP is to die at once: no ``finally`` block, no context
manager's exit. A stage killed so would leave its temporary folders and DuckDB's work database
behind, and a ``with EdgeNetwork`` block its network. [`exit_on_signals`][] turns them into
``SystemExit(128 + signal)`` while inside: the stack unwinds, every temporary is removed, and
the exit status is the shell's for that signal (143 for SIGTERM).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

#: The signals :func:`exit_on_signals` turns into :class:`SystemExit`.
SIGNALS = (signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def exit_on_signals() -> Iterator[None]:
    """Raise ``SystemExit(128 + signum)`` on SIGTERM or SIGHUP while inside; the handlers are
    restored after. Outside the main thread (where no handler can be set) it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _exit(signum, _frame):
        raise SystemExit(128 + signum)

    saved = {s: signal.signal(s, _exit) for s in SIGNALS}
    try:
        yield
    finally:
        for s, handler in saved.items():
            signal.signal(s, handler)


def wraps_interrupt(err: BaseException) -> bool:
    """Whether a Ctrl-C lies in ``err``'s cause chain: Hydra turns one raised while it composes
    into a config error, and Python one raised in a class body's ``__set_name__`` into a
    ``RuntimeError``; the command line reports either as the interrupt it is."""
    seen: set[int] = set()
    cause: BaseException | None = err
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, KeyboardInterrupt):
            return True
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return False
