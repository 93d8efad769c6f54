"""The embedded default dataset: a seeded synthetic generator calibrated to Criteo Kaggle.

No network is needed, so the whole pipeline (and CI) runs on it. What it reproduces:

* **Schema**: 13 dense count features ``I1..I13`` and 26 categorical features ``C1..C26`` whose
  cardinalities are Criteo Kaggle's (facebookresearch/dlrm's ``ln_emb``) times a scale factor.
* **Skew**: feature ``f`` draws its rows by popularity rank ``r = 1..n_f`` from a power law
  ``P(r) ~ r^-a_f``. Each ``a_f`` is solved (bisection) so that the top 1% of the table's rows
  (at least one row) take ``top1_share`` of its lookups (the real 8,000-row Criteo sample
  measures 62%, pooled over features). Pooled over all 26 tables the share is higher, because the
  small tables (3..30 rows) sit wholly inside the top 1%; the dataset-statistics stage reports
  both. Ranks are mapped to ids by a seeded permutation, so hot rows are scattered over the id
  space as hashed ids are.
* **Learnable labels** from a hidden model (a logistic model the trainer does not see):

      logit = b + sum_f w_f[id_f] + sum_(f,g) <u_f[id_f], v_g[id_g]> + <c, log1p(dense)> + eps
      label ~ Bernoulli(sigmoid(logit)),   eps ~ N(0, label_noise^2)

  with ``b`` solved so that the positive rate is ``ctr``. Popular rows are seen often and so
  their weights can be learned; test AUC well above 0.5 is reachable.
* **Sessions** (optional): consecutive samples of one user share the user-side features (RecD's
  dedup opportunity); session lengths are geometric with the configured mean.
* **Sequence feature** (optional): ``hist_<item>``, the user's previous item ids (a pre-history
  drawn from the same item distribution, then the items of the session's earlier samples).

Categorical ids are in ``1..card-1``; id 0 is reserved for "missing" as in every encoded source.
Every random choice comes from ``numpy.random.default_rng(seed)`` streams, so the same config
gives byte-identical output.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from workbench.data.config import SyntheticConfig
from workbench.data.schema import LABEL, SESSION, ParseReport, RawTable

#: Criteo Kaggle cardinalities of C1..C26 (facebookresearch/dlrm, bench/dlrm_s_criteo_kaggle.sh).
CRITEO_KAGGLE_CARDINALITIES: tuple[int, ...] = (
    1460, 583, 10131227, 2202608, 305, 24, 12517, 633, 3, 93145, 5683, 8351593, 3194, 27, 14992,
    5461306, 10, 5652, 2173, 4, 7046547, 18, 15, 286181, 105, 142572)
N_DENSE = 13
DENSE_NAMES = [f"I{i}" for i in range(1, N_DENSE + 1)]
CATEGORICAL_NAMES = [f"C{i}" for i in range(1, len(CRITEO_KAGGLE_CARDINALITIES) + 1)]
#: Feature pairs that interact in the hidden label model (a few, as in real CTR data).
_INTERACTIONS = ((0, 2), (1, 3), (4, 9), (5, 11), (13, 15), (20, 23))
_HIDDEN_DIM = 4


def scaled_cardinalities(scale: float, min_cardinality: int = 2) -> dict[str, int]:
    """Criteo Kaggle's cardinalities times ``scale`` (rounded up), at least ``min_cardinality``.

    The returned cardinality counts id 0 (missing), so a table has ``card - 1`` real rows.
    """
    return {name: max(min_cardinality, int(np.ceil(c * scale)) + 1)
            for name, c in zip(CATEGORICAL_NAMES, CRITEO_KAGGLE_CARDINALITIES)}


#: Up to this many ranks :func:`top_share` sums every term; a longer table's tail past them is
#: summed in closed form (:func:`_tail_sum`), so calibrating a 10M-row table's exponent costs 50
#: sums of 65,536 powers instead of 50 of 10M (27 s of the Criteo-cardinality generators).
_EXACT_RANKS = 1 << 16


def top_share(alpha: float, n: int, fraction: float = 0.01) -> float:
    """Expected share of lookups taken by the top ``fraction`` of ``n`` rows (at least one row)
    when rows are drawn with ``P(r) ~ r^-alpha``.

    Up to `_EXACT_RANKS` rows every term is summed; past them (when the top rows fit
    among them) the rest of the normaliser is `_tail_sum`'s, within a few units in the
    last place of the full sum.
    """
    k = max(1, int(np.ceil(fraction * n)))
    m = max(k, _EXACT_RANKS)
    if n <= m:
        return float(_power_law(n, alpha)[:k].sum())
    head = _power_weights(m, alpha)
    return float(head[:k].sum() / (head.sum() + _tail_sum(m, n, alpha)))


def _tail_sum(m: int, n: int, alpha: float) -> float:
    """``sum_{r=m+1}^{n} r^-alpha`` by Euler-Maclaurin to the third derivative: the integral,
    half the end terms and the ``B_2``, ``B_4`` corrections; the remainder is below
    ``alpha^5 m^-(alpha+5)`` (1e-24 at m = 65,536), far under a double's rounding of the sum.
    """
    a, lo, hi = alpha, float(m + 1), float(n)
    log_ratio = np.log(hi / lo)
    t = (1.0 - a) * log_ratio  # the integral lo^(1-a) (e^t - 1) / (1 - a), stable at a = 1
    integral = lo ** (1.0 - a) * log_ratio * (np.expm1(t) / t if t != 0.0 else 1.0)
    ends = 0.5 * (lo ** -a + hi ** -a)

    def d1(x: float) -> float:
        return -a * x ** (-a - 1.0)

    def d3(x: float) -> float:
        return -a * (a + 1.0) * (a + 2.0) * x ** (-a - 3.0)

    return float(integral + ends + (d1(hi) - d1(lo)) / 12.0 - (d3(hi) - d3(lo)) / 720.0)


def calibrate_exponent(n: int, target: float, fraction: float = 0.01) -> float:
    """The exponent whose top ``fraction`` of ``n`` rows take ``target`` of the lookups.

    Bisection on ``alpha`` in [0, 8] (the share is monotone in ``alpha``); returns 0 when even a
    uniform draw exceeds the target (a table of one or two rows) and 8 when it is unreachable.
    """
    lo, hi = 0.0, 8.0
    if n <= 1 or top_share(lo, n, fraction) >= target:
        return lo
    if top_share(hi, n, fraction) <= target:
        return hi
    for _ in range(50):
        mid = 0.5 * (lo + hi)
        if top_share(mid, n, fraction) < target:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def _power_weights(n: int, alpha: float) -> np.ndarray:
    """``r^-alpha`` over ranks ``1..n`` (not normalised)."""
    return np.arange(1, n + 1, dtype=np.float64) ** -alpha


def _power_law(n: int, alpha: float) -> np.ndarray:
    """Normalised ``P(r) ~ r^-alpha`` over ranks ``1..n``."""
    weights = _power_weights(n, alpha)
    return weights / weights.sum()


class _PowerLawSampler:
    """Draws ids ``1..n`` of one table with power-law popularity over a seeded rank->id map."""

    def __init__(self, n: int, alpha: float, rng: np.random.Generator) -> None:
        self.cdf = np.cumsum(_power_law(n, alpha))
        self.cdf /= self.cdf[-1]
        self.rank_to_id = rng.permutation(n).astype(np.int64) + 1

    def __call__(self, size: int, rng: np.random.Generator) -> np.ndarray:
        ranks = np.searchsorted(self.cdf, rng.random(size), side="right")
        return self.rank_to_id[np.minimum(ranks, len(self.cdf) - 1)]


def _session_ids(rows: int, mean_length: float, rng: np.random.Generator) -> np.ndarray:
    """Consecutive session ids for ``rows`` samples with geometric lengths of the given mean."""
    lengths = rng.geometric(1.0 / mean_length, size=rows // max(1, int(mean_length)) * 2 + 16)
    while lengths.sum() < rows:
        lengths = np.concatenate([lengths, rng.geometric(1.0 / mean_length, size=len(lengths))])
    return np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)[:rows]


def _history(session: np.ndarray, items: np.ndarray, length: int, sampler: _PowerLawSampler,
             rng: np.random.Generator) -> pd.Series:
    """Per sample: up to ``length`` previous item ids of its session, most recent last
    ([`_history_arrays`][] as a list column)."""
    values, counts = _history_arrays(session, items, length, sampler, rng)
    return _list_series(values, np.r_[0, np.cumsum(counts)])


def _history_arrays(session: np.ndarray, items: np.ndarray, length: int,
                    sampler: _PowerLawSampler, rng: np.random.Generator
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Per sample: up to ``length`` previous item ids of its session, most recent last, as
    ``(values, lengths)``.

    Each session starts with a pre-history of ``Uniform{0..length}`` items drawn from the item
    distribution, followed by the items of the session's samples; sample ``k`` sees the ``length``
    items before its own position. Fully vectorised over ranges of a flat item stream.
    """
    rows = len(session)
    starts = np.flatnonzero(np.r_[True, session[1:] != session[:-1]])
    n_sessions = len(starts)
    pre_len = rng.integers(0, length + 1, size=n_sessions)
    pre_items = sampler(int(pre_len.sum()), rng)
    sess_len = np.diff(np.r_[starts, rows])
    # Flat stream: session s = pre-history(s) ++ items(s).
    stream_len = pre_len + sess_len
    stream_start = np.r_[0, np.cumsum(stream_len)[:-1]]
    stream = np.empty(int(stream_len.sum()), dtype=np.int64)
    pre_pos = np.repeat(stream_start, pre_len) + _ranges(pre_len)
    stream[pre_pos] = pre_items
    sess_of_row = np.repeat(np.arange(n_sessions), sess_len)
    row_pos = stream_start[sess_of_row] + pre_len[sess_of_row] + _ranges(sess_len)
    stream[row_pos] = items
    # Sample at stream position p sees stream[max(session start, p - length) : p].
    lo = np.maximum(stream_start[sess_of_row], row_pos - length)
    counts = row_pos - lo
    return stream[np.repeat(lo, counts) + _ranges(counts)], counts


def _ranges(lengths: np.ndarray) -> np.ndarray:
    """Concatenation of ``arange(l)`` for every ``l`` in ``lengths`` (vectorised)."""
    lengths = np.asarray(lengths, dtype=np.int64)
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    ends = np.cumsum(lengths)
    return np.arange(total, dtype=np.int64) - np.repeat(ends - lengths, lengths)


def _list_series(values: np.ndarray, offsets: np.ndarray) -> pd.Series:
    """A pandas Series of int64 lists backed by Arrow (no per-row Python objects)."""
    import pyarrow as pa

    array = pa.LargeListArray.from_arrays(pa.array(offsets, pa.int64()), pa.array(values))
    return pd.Series(pd.arrays.ArrowExtensionArray(array))


class SyntheticGenerator:
    """The generator's model (cardinalities, samplers, hidden label model), drawn once, and
    [`chunk`][] to draw its samples a chunk at a time.

    Every stream continues across chunks, so one chunk of all the rows is exactly
    [`generate`][]'s table; with several chunks, sessions and histories end at chunk
    boundaries, and the label bias and dense centring are those of the first chunk. Memory is the
    model (about 16 bytes per table row, plus 32 per row of the six interaction tables: ~1.5 GB at
    Criteo's full cardinalities) plus one chunk.

    Args:
        cfg: generator settings.
        seed: the run's seed.
        keys_only: build the id samplers alone (no dense features, no label model): only
            [`keys`][] works, the same ids [`chunk`][] would draw, in about 16 bytes per
            table row (the HET replays at Criteo's full cardinality need no labels).
    """

    def __init__(self, cfg: SyntheticConfig, seed: int, keys_only: bool = False) -> None:
        self.cfg = cfg
        self.keys_only = keys_only
        self.cards = scaled_cardinalities(cfg.cardinality_scale, cfg.min_cardinality)
        self.user_side = list(cfg.sessions.user_features) if cfg.sessions.enabled else []
        unknown = sorted(set(self.user_side) - set(CATEGORICAL_NAMES))
        if unknown:
            raise ValueError(f"dataset.synthetic.sessions.user_features names unknown features "
                             f"{unknown} (allowed: C1..C26)")
        item = cfg.sequence.item_feature
        if cfg.sequence.enabled and item not in CATEGORICAL_NAMES:
            raise ValueError(f"dataset.synthetic.sequence.item_feature = {item!r}: must be one of "
                             "C1..C26")
        root = np.random.default_rng(seed)
        # Independent streams, so adding a feature never changes the draws of the others.
        seeds = root.integers(0, 2**63 - 1, size=len(CATEGORICAL_NAMES) * 2 + 8)
        stream = iter(np.random.default_rng(s) for s in seeds)
        self.rng_sess = next(stream)
        self.rng_ids: dict[str, np.random.Generator] = {}
        self.samplers: dict[str, _PowerLawSampler] = {}
        for name in CATEGORICAL_NAMES:
            n = self.cards[name] - 1
            self.rng_ids[name] = rng = next(stream)
            self.samplers[name] = _PowerLawSampler(n, calibrate_exponent(n, cfg.top1_share), rng)
        self.next_session = 0
        self.rng_dense = next(stream)
        self.rng_label = rng_label = next(stream)
        self.rng_history = next(stream) if cfg.sequence.enabled else None
        self.sequences = {f"hist_{item}": item} if cfg.sequence.enabled else {}
        if keys_only:
            return
        self.mu = self.rng_dense.uniform(0.0, 3.0, size=N_DENSE)
        self.weights = {name: rng_label.normal(0.0, 0.35, size=self.cards[name])
                        for name in CATEGORICAL_NAMES}
        self.interactions = []
        for a, b in _INTERACTIONS:
            fa, fb = CATEGORICAL_NAMES[a], CATEGORICAL_NAMES[b]
            u = rng_label.normal(0.0, 0.5, size=(self.cards[fa], _HIDDEN_DIM))
            v = rng_label.normal(0.0, 0.5, size=(self.cards[fb], _HIDDEN_DIM))
            self.interactions.append((fa, fb, u, v))
        self.coef = rng_label.normal(0.0, 0.3, size=N_DENSE)
        self.dense_mean: np.ndarray | None = None
        self.bias: float | None = None

    def _sessions(self, rows: int) -> tuple[np.ndarray, np.ndarray]:
        """The next ``rows`` samples' session ids and each sample's session index (``0..``)."""
        cfg = self.cfg
        session = (_session_ids(rows, cfg.sessions.mean_length, self.rng_sess)
                   if cfg.sessions.enabled else np.arange(rows, dtype=np.int64))
        session = session + self.next_session
        self.next_session = int(session[-1]) + 1
        return session, np.cumsum(np.r_[True, session[1:] != session[:-1]]) - 1

    def _draw(self, name: str, session_index: np.ndarray) -> np.ndarray:
        """Feature ``name``'s ids (``1..card-1``) of samples with these session indices: one
        draw per session for a user-side feature, else one per sample."""
        sampler, rng = self.samplers[name], self.rng_ids[name]
        if name in self.user_side:
            return sampler(int(session_index[-1]) + 1, rng)[session_index]
        return sampler(len(session_index), rng)

    def _ids(self, rows: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """The next ``rows`` samples' session ids and categorical ids (``1..card-1``)."""
        session, index = self._sessions(rows)
        return session, {name: self._draw(name, index) for name in CATEGORICAL_NAMES}

    @property
    def table_rows(self) -> int:
        """Rows of the concatenated table of every feature's ids (id 0, missing, excluded)."""
        return sum(self.cards[name] - 1 for name in CATEGORICAL_NAMES)

    def keys(self, rows: int) -> np.ndarray:
        """The next ``rows`` samples' ids as keys of the concatenated table: ``int64 [rows,
        F]``, feature f's id - 1 + the real rows of the features before it (the ids
        [`chunk`][] would draw: the same streams)."""
        _, ids = self._ids(rows)
        offsets = np.cumsum([0] + [self.cards[n] - 1 for n in CATEGORICAL_NAMES[:-1]])
        out = np.empty((rows, len(CATEGORICAL_NAMES)), np.int64)
        for j, name in enumerate(CATEGORICAL_NAMES):
            np.add(ids[name], offsets[j] - 1, out=out[:, j])
        return out

    def histories(self, rows: int) -> tuple[np.ndarray, np.ndarray]:
        """The next ``rows`` samples' item histories as ``(values, lengths)``: every history's
        item ids (``int64``, concatenated) and each sample's history length, the lists
        [`chunk`][] puts in ``hist_<item>`` (the same streams: the session and item draws, then
        the history's). Only the session and item streams advance, so a generator used for
        histories is used for nothing else.

        Raises:
            ValueError: the generator has no sequence feature (``sequence.enabled`` false).
        """
        if self.rng_history is None:
            raise ValueError("histories(): this generator has no sequence feature "
                             "(synthetic.sequence.enabled is false)")
        cfg = self.cfg
        item = cfg.sequence.item_feature
        session, index = self._sessions(rows)
        ids = self._draw(item, index)
        return _history_arrays(session, ids, cfg.sequence.length, self.samplers[item],
                               self.rng_history)

    def chunk(self, rows: int) -> pd.DataFrame:
        """The next ``rows`` samples (columns as in [`generate`][]'s table)."""
        if self.keys_only:
            raise ValueError("a keys_only generator draws keys(), not chunk()")
        cfg = self.cfg
        session, ids = self._ids(rows)

        # Dense Criteo-like counts: log-normal magnitudes, I2 may be -1, some values missing.
        raw_dense = np.floor(np.exp(self.rng_dense.normal(self.mu, 1.2, size=(rows, N_DENSE))))
        raw_dense[:, 1] -= 1.0
        log_dense = np.log1p(np.clip(raw_dense, 0.0, None))
        missing = self.rng_dense.random((rows, N_DENSE)) < cfg.dense_missing_rate
        log_dense[missing] = 0.0
        raw_dense[missing] = np.nan

        # Hidden label model.
        logit = np.zeros(rows)
        for name in CATEGORICAL_NAMES:
            logit += self.weights[name][ids[name]]
        for fa, fb, u, v in self.interactions:
            logit += np.einsum("ij,ij->i", u[ids[fa]], v[ids[fb]])
        if self.dense_mean is None:
            self.dense_mean = log_dense.mean(axis=0)
        logit += (log_dense - self.dense_mean) @ self.coef
        logit += (self.rng_label.normal(0.0, cfg.label_noise, size=rows)
                  if cfg.label_noise > 0 else 0.0)
        if self.bias is None:
            self.bias = _solve_bias(logit, cfg.ctr)
        labels = (self.rng_label.random(rows) < _sigmoid(logit + self.bias)).astype(np.float32)

        frame: dict[str, np.ndarray | pd.Series] = {LABEL: labels}
        for j, name in enumerate(DENSE_NAMES):
            frame[name] = raw_dense[:, j]
        for name in CATEGORICAL_NAMES:
            frame[name] = ids[name]
        for col, item in self.sequences.items():
            assert self.rng_history is not None  # set whenever sequences are
            frame[col] = _history(session, ids[item], cfg.sequence.length, self.samplers[item],
                                  self.rng_history)
        if cfg.sessions.enabled:
            frame[SESSION] = session
        return pd.DataFrame(frame)

    def chunks(self, chunk_rows: int) -> Iterator[pd.DataFrame]:
        """All ``cfg.rows`` samples in chunks of ``chunk_rows`` (the last one shorter)."""
        for start in range(0, self.cfg.rows, chunk_rows):
            yield self.chunk(min(chunk_rows, self.cfg.rows - start))

    def raw_table(self, frame: pd.DataFrame) -> RawTable:
        """``frame`` (chunks of this generator) with its column roles."""
        return RawTable(frame=frame, dense=list(DENSE_NAMES), categorical=list(CATEGORICAL_NAMES),
                        user_side=self.user_side, sequences=dict(self.sequences),
                        has_session=self.cfg.sessions.enabled,
                        report=ParseReport(files=["<synthetic>"], rows=len(frame)))


def generate(cfg: SyntheticConfig, seed: int) -> tuple[RawTable, dict[str, int]]:
    """Generate the synthetic dataset in memory (one chunk).

    Args:
        cfg: generator settings.
        seed: the run's seed.

    Returns:
        The table (categorical columns already ids in ``1..card-1``) and the cardinality of
        every categorical feature (the embedding-table sizes, id 0 included).
    """
    generator = SyntheticGenerator(cfg, seed)
    return generator.raw_table(generator.chunk(cfg.rows)), generator.cards


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _solve_bias(logit: np.ndarray, ctr: float) -> float:
    """The bias ``b`` with ``mean(sigmoid(logit + b)) == ctr`` (bisection; monotone in b)."""
    lo, hi = -30.0, 30.0
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        if _sigmoid(logit + mid).mean() < ctr:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


# ------------------------------------------------------------------- the synthetic as raw files

_HEX = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)
#: Knuth's multiplicative hash: a bijection of uint32, so distinct ids stay distinct tokens.
_HASH_MULTIPLIER = np.uint64(2654435761)


def hex_tokens(ids: np.ndarray, salt: int) -> pa.Array:
    """Ids as Criteo-like 8-hex-digit tokens (a bijective hash of ``id + salt``), vectorised."""
    hashed = ((ids.astype(np.uint64) + np.uint64(salt)) * _HASH_MULTIPLIER) & np.uint64(0xFFFFFFFF)
    shifts = np.arange(28, -4, -4, dtype=np.uint64)
    chars = _HEX[((hashed[:, None] >> shifts) & np.uint64(0xF)).astype(np.intp)]
    n = len(ids)
    offsets = np.arange(0, 8 * (n + 1), 8, dtype=np.int32)
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(chars.tobytes()))


def criteo_tsv_table(frame: pd.DataFrame) -> pa.Table:
    """A chunk of the generator as Criteo ``train.txt`` columns (label, I1..I13 as integers or
    empty, C1..C26 as hex tokens), ready for a tab-separated, headerless CSV writer."""
    columns = {LABEL: pa.array(frame[LABEL].to_numpy().astype(np.int8))}
    for name in DENSE_NAMES:
        values = frame[name].to_numpy()
        missing = np.isnan(values)
        columns[name] = pa.array(np.where(missing, 0, values).astype(np.int64), mask=missing)
    for j, name in enumerate(CATEGORICAL_NAMES):
        columns[name] = hex_tokens(frame[name].to_numpy(), salt=j << 27)
    return pa.table(columns)


def write_criteo_tsv(cfg: SyntheticConfig, seed: int, path: Path | str,
                     progress: bool = False) -> int:
    """Write the synthetic dataset as a Criteo ``train.txt`` (TSV, no header), chunk by chunk.

    Memory is the generator's model plus one chunk (``cfg.chunk_rows``), whatever ``cfg.rows``;
    the benchmark and the tests make large Criteo-format inputs with it. Written atomically.

    Args:
        cfg: generator settings (``cfg.rows`` lines are written).
        seed: the run's seed.
        path: the output file.
        progress: show a tqdm bar over rows.

    Returns:
        The lines written.
    """
    import pyarrow.csv as pacsv
    from tqdm.auto import tqdm

    from workbench.utils.io import atomic_path

    generator = SyntheticGenerator(cfg, seed)
    options = pacsv.WriteOptions(include_header=False, delimiter="\t", quoting_style="none")
    written = 0
    with atomic_path(Path(path), suffix=".tsv") as tmp, \
            tqdm(total=cfg.rows, disable=not progress, desc="criteo tsv", unit=" rows",
                 unit_scale=True) as bar:
        writer = None
        for chunk in generator.chunks(cfg.chunk_rows):
            table = criteo_tsv_table(chunk)
            if writer is None:
                writer = pacsv.CSVWriter(str(tmp), table.schema, write_options=options)
            writer.write_table(table)
            written += table.num_rows
            bar.update(table.num_rows)
        if writer is not None:
            writer.close()
    return written
