"""One columnar schema for every data source.

Every source (a real dataset's raw files, the embedded synthetic generator, a file the user already
has) is turned into the same two-step shape:

    raw files --parser--> RawTable --encode--> Parquet (train/test) + meta.json
                          (tokens)             (ids 0..card-1 per feature)

``RawTable`` is what a parser returns: a pandas DataFrame whose columns have *roles*:

* ``label``: float32, 0.0 or 1.0.
* dense features: float64/float32, NaN where the value is missing.
* categorical features: raw tokens (str or int64); ``None``/NaN where missing.
* optional ``session`` key (int64: samples of one user/session share user-side features) and
  ``timestamp`` (int64 seconds) columns.
* optional sequence (list) columns whose elements share the index space of a categorical feature
  (e.g. a user's history of item ids).

The encoded Parquet file (written by [`workbench.data.preprocess`][]) has the same column names,
with categorical and sequence values replaced by ids in ``0..cardinality-1`` of their feature
(id 0 is reserved for "missing or rarer than the frequency threshold"), dense values transformed
(``log1p`` of the value clipped at 0, missing -> 0), ``label`` float32. ``meta.json`` beside it is
[`DatasetMeta`][]: cardinalities, which features are user-side (constant within a session:
dedup candidates), and provenance (source, file checksums, rows, malformed-row counts).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from workbench.utils.errors import MissingInputError, UserError

LABEL = "label"
#: The stages that need no labels (they replay or count keys, or time a step): what a dataset
#: of one label class (a session log without purchases) can run; every other stage reports AUC.
LABEL_FREE_STAGES = ("het-cache", "dedup", "recd", "flexshard")
SESSION = "session"
TIMESTAMP = "timestamp"
META_FILE = "meta.json"
MISSING_ID = 0


class MalformedInputError(UserError, ValueError):
    """A raw input row could not be parsed (raised in strict mode).

    The message always starts with ``<file>:<line>:`` so the user can open the offending row.
    """


@dataclass
class ParseReport:
    """What a parser saw.

    Attributes:
        files: the raw files read, in order.
        rows: rows kept.
        malformed: rows dropped as malformed (wrong field count, unparsable value, bad label).
        examples: up to 10 ``"<file>:<line>: <reason>"`` strings for the first malformed rows.
    """

    files: list[str] = field(default_factory=list)
    rows: int = 0
    malformed: int = 0
    examples: list[str] = field(default_factory=list)

    MAX_EXAMPLES = 10

    def add_malformed(self, where: str, reason: str, count: int = 1) -> None:
        """Count ``count`` malformed rows; keep the first few descriptions."""
        self.malformed += count
        if len(self.examples) < self.MAX_EXAMPLES:
            self.examples.append(f"{where}: {reason}")

    def merge(self, other: ParseReport) -> ParseReport:
        """Return the combined report of two parses (files concatenated, counts added)."""
        merged = ParseReport(self.files + other.files, self.rows + other.rows,
                             self.malformed + other.malformed)
        merged.examples = (self.examples + other.examples)[: self.MAX_EXAMPLES]
        return merged


@dataclass
class RawTable:
    """A parsed but not yet encoded table (see the module docstring for the column roles).

    Attributes:
        frame: the rows; columns ``label``, ``dense``, ``categorical`` and, when present,
            ``session``, ``timestamp`` and the keys of ``sequences``.
        dense: dense feature column names, in order.
        categorical: categorical feature column names, in order.
        user_side: the categorical features that are constant within a session.
        sequences: list-valued column name -> the categorical feature whose index space it uses.
        has_session: whether ``frame`` has a ``session`` column.
        has_timestamp: whether ``frame`` has a ``timestamp`` column.
        report: the parser's row accounting.
    """

    frame: pd.DataFrame
    dense: list[str]
    categorical: list[str]
    user_side: list[str] = field(default_factory=list)
    sequences: dict[str, str] = field(default_factory=dict)
    has_session: bool = False
    has_timestamp: bool = False
    report: ParseReport = field(default_factory=ParseReport)

    def __post_init__(self) -> None:
        expected = [LABEL, *self.dense, *self.categorical]
        if self.has_session:
            expected.append(SESSION)
        if self.has_timestamp:
            expected.append(TIMESTAMP)
        expected += list(self.sequences)
        missing = [c for c in expected if c not in self.frame.columns]
        if missing:
            raise ValueError(f"RawTable is missing columns {missing}")
        unknown_user = sorted(set(self.user_side) - set(self.categorical))
        if unknown_user:
            raise ValueError(f"user_side names non-categorical columns {unknown_user}")
        bad_seq = {k: v for k, v in self.sequences.items() if v not in self.categorical}
        if bad_seq:
            raise ValueError(f"sequences refer to unknown categorical features {bad_seq}")

    @property
    def columns(self) -> list[str]:
        """All role columns in schema order."""
        cols = [LABEL, *self.dense, *self.categorical]
        cols += [SESSION] if self.has_session else []
        cols += [TIMESTAMP] if self.has_timestamp else []
        return cols + list(self.sequences)


@dataclass
class DatasetMeta:
    """The metadata file written beside an encoded dataset.

    Attributes:
        name: dataset name (the config's ``dataset.name``).
        source: where the rows came from (``synthetic``, ``url``, ``local``).
        rows: rows per split, e.g. ``{"train": 900, "test": 100}``.
        dense: dense feature names.
        categorical: categorical feature names.
        cardinalities: categorical feature -> number of ids (``0..card-1``; id 0 = missing/rare).
        user_side: categorical features constant within a session.
        sequences: list column -> categorical feature whose ids it holds.
        has_session: a ``session`` column is present.
        has_timestamp: a ``timestamp`` column is present.
        provenance: free-form, JSON-serialisable: raw files with sha256, parser report, config.
    """

    name: str
    source: str
    rows: dict[str, int]
    dense: list[str]
    categorical: list[str]
    cardinalities: dict[str, int]
    user_side: list[str] = field(default_factory=list)
    sequences: dict[str, str] = field(default_factory=dict)
    has_session: bool = False
    has_timestamp: bool = False
    provenance: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        """Serialise deterministically (sorted keys, fixed indentation)."""
        return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True) + "\n"

    @classmethod
    def read(cls, directory: Path | str) -> DatasetMeta:
        """Load ``meta.json`` from an encoded dataset directory."""
        path = Path(directory) / META_FILE
        if not path.exists():
            raise MissingInputError(f"{path} not found: run the preprocess stage for this dataset")
        return cls(**json.loads(path.read_text()))
