r"""The one error family of the workbench.


    WorkbenchError                      every error the workbench raises on purpose
     +-- UserError                      the input is wrong or missing: shown as ONE line,
     |    |                             "<Class>: <message>", no traceback (command line,
     |    |                             notebook, papermill alike)
     |    +-- ConfigError               a config key is missing, unknown or out of range
     |    +-- MissingInputError         a file a stage reads is absent (run the stage that
     |    |                             writes it)
     |    +-- DatasetUnavailable, MalformedInputError, DownloadError, NoSessionsError, ...
     +-- (internal errors)              a broken invariant or a failed worker process: the
                                        traceback is kept, it is a bug or a crash to report

A ``UserError`` message names the problem and the fix: the file and line, the config key and its
allowed range, the command that prepares what is missing. The command line
([`workbench.stages.main`][]) catches ``UserError`` (and nothing by name), prints its
[`one_line`][] and exits with status 2; in a notebook, IPython calls ``_render_traceback_``
and shows the same line.

Each class keeps a standard base too (``ValueError``, ``KeyError``, ``RuntimeError``) where code
and tests catch it by that base.
"""

from __future__ import annotations


class WorkbenchError(Exception):
    """Base of every error the workbench raises on purpose."""


class UserError(WorkbenchError):
    """The user's input (config, data, files, names) is wrong or missing.

    Shown as one line without a traceback: by the command line, and in a notebook through
    IPython's ``_render_traceback_`` hook (papermill reports the same line).
    """

    def _render_traceback_(self) -> list[str]:
        return [one_line(self)]


class MissingInputError(UserError, FileNotFoundError):
    """A file a stage reads is absent: the message names it and the stage that writes it."""


def one_line(err: BaseException) -> str:
    """``"<Class>: <message>"``, the single line a user error is shown as."""
    return f"{type(err).__name__}: {err}"
