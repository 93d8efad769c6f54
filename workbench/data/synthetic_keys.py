"""The synthetic generator's keys alone, at a fraction of its cardinalities, drawn in chunks.

HET's replays need only the keys of Criteo Kaggle's shape (no labels, no dense features): the
generator's id streams ([`keys`][workbench.data.synthetic.SyntheticGenerator.keys]) at
``scale`` of its cardinalities, ``chunk_rows`` samples at a time, so an epoch of 45.8M samples
is drawn with one chunk in memory ([`key_chunks`][]) or straight into a memory-mapped file
([`write_keys`][]) that several replay processes read at once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from workbench.data.config import SyntheticConfig
from workbench.data.synthetic import CATEGORICAL_NAMES, SyntheticGenerator


def key_chunks(cfg: SyntheticConfig, scale: float, samples: int, seed: int,
               chunk_rows: int) -> tuple[int, Iterator[np.ndarray]]:
    """The table's rows and the ``samples`` samples' keys ``int64 [<= chunk_rows, 26]``, chunk
    by chunk, at ``scale`` of Criteo Kaggle's cardinalities (the same keys whatever
    ``chunk_rows``: the generator's streams are drawn in order)."""
    generator = SyntheticGenerator(dataclasses.replace(cfg, cardinality_scale=scale), seed,
                                   keys_only=True)

    def chunks() -> Iterator[np.ndarray]:
        for start in range(0, samples, chunk_rows):
            yield generator.keys(min(chunk_rows, samples - start))
    return generator.table_rows, chunks()


def draw_keys(cfg: SyntheticConfig, scale: float, samples: int, seed: int,
              chunk_rows: int) -> tuple[np.ndarray, int]:
    """All ``samples`` samples' keys ``int64 [samples, 26]`` in memory, and the table's rows."""
    rows, chunks = key_chunks(cfg, scale, samples, seed, chunk_rows)
    return np.concatenate(list(chunks)), rows


def write_keys(path: Path, cfg: SyntheticConfig, scale: float, samples: int, seed: int,
               chunk_rows: int, progress: bool = False) -> int:
    """Draw the keys into ``path``, an ``.npy`` of ``int32 [samples, 26]`` that
    `numpy.load` memory-maps (``mmap_mode="r"``); returns the table's rows.

    Raises:
        ValueError: the table has more rows than an ``int32`` key can name.
    """
    from tqdm.auto import tqdm

    rows, chunks = key_chunks(cfg, scale, samples, seed, chunk_rows)
    if rows > np.iinfo(np.int32).max:
        raise ValueError(f"{rows:,} table rows: more than an int32 key names")
    out = np.lib.format.open_memmap(path, mode="w+", dtype=np.int32,
                                   shape=(samples, len(CATEGORICAL_NAMES)))
    done = 0
    with tqdm(total=samples, disable=not progress, desc="keys", unit="sample",
              unit_scale=True) as bar:
        for chunk in chunks:
            out[done: done + len(chunk)] = chunk
            done += len(chunk)
            bar.update(len(chunk))
    out.flush()
    del out
    return rows
