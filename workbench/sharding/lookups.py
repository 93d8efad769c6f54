r"""The lookups a sharding plan is judged on, and the profile its planner is made from.

One sequence (user history) feature of a dataset is a table of N rows; a sample looks up every
row id of its history. Iteration ``t`` at P devices of b samples each takes the samples
``t P b .. (t + 1) P b - 1`` in order, device d the samples ``d b .. d b + b - 1`` of them.

Two sources of samples, one interface ([`LookupSource`][]: a profile per device count, the
replayed iterations, the share of replayed samples the profile read):

* [`SplitSource`][] (a preprocessed train split, every dataset): at P devices the profile is
  the first ``profile_batches`` iterations of P b samples and the replay the next
  ``replay_batches``; a split shorter than both wraps around (``replay_in_profile`` > 0).
* [`StreamSource`][] (a synthetic dataset's generator, drawn a chunk at a time, never stored):
  the profile is the first S samples, the same for every device count, counted in iterations
  of the base topology's global batch ([`ProfileCounter`][]: two arrays of N, whatever S),
  snapshotted at every swept length; the replay is the samples after the longest profile,
  enough for ``replay_batches`` iterations of the largest device count, so every replay is
  held out. The generator draws exactly the samples its materialised dataset holds (the same
  streams, chunk by chunk), continued past them.

A profile's reach is its *coverage*: the share of the replayed lookups on rows it saw. A plan
made from the profile leaves every unseen row row-wise, as RW does, so the coverage bounds the
inter-node reduction any profile-driven plan reaches.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from workbench.data.preprocess import read_split
from workbench.data.schema import DatasetMeta
from workbench.sharding.planner import ProfileCounter, estimate_probability, missing_mass
from workbench.utils.errors import UserError
from workbench.utils.validation import ConfigError


class NoSequenceError(UserError, ValueError):
    """The dataset has no sequence feature to shard."""


class SequenceLookups:
    """Samples' sequences as flat lookups, cut into iterations.

    Args:
        values: ``int64`` the row ids of every sequence, concatenated.
        lengths: ``int64[n]`` each sample's sequence length.
        rows: N, rows of the table.
    """

    def __init__(self, values: np.ndarray, lengths: np.ndarray, rows: int) -> None:
        self.values, self.lengths, self.rows = values, lengths, rows
        self.offsets = np.r_[0, np.cumsum(lengths)].astype(np.int64)

    @classmethod
    def read(cls, processed: Path, feature: str | None) -> SequenceLookups:
        """The train split's sequence ``feature`` (None: the first one).

        Raises:
            NoSequenceError: the dataset has no sequence feature.
            ConfigError: ``feature`` is not one of its sequence features.
        """
        meta = DatasetMeta.read(processed)
        if not meta.sequences:
            raise NoSequenceError(
                f"{processed.name} has no sequence (list) feature: FlexShard shards sequence "
                "embedding tables; use a dataset with user histories (synthetic_sessions, "
                "taobao_sample, movielens_100k_sample) in experiments.flexshard.datasets")
        name = feature or next(iter(meta.sequences))
        if name not in meta.sequences:
            raise ConfigError(f"experiments.flexshard.sequence_feature = {name!r}: not a "
                              f"sequence feature of {processed.name} ({list(meta.sequences)})")
        lists = read_split(processed, "train", columns=[name])[name].to_numpy()
        lengths = np.fromiter((len(x) for x in lists), dtype=np.int64, count=len(lists))
        values = (np.concatenate([np.asarray(x, dtype=np.int64) for x in lists])
                  if len(lists) else np.zeros(0, np.int64))
        if values.size == 0:
            raise NoSequenceError(f"{processed.name}: the sequence feature {name!r} has no "
                                  "values in the train split; nothing to shard")
        return cls(values, lengths, int(meta.cardinalities[meta.sequences[name]]))

    def iteration(self, t: int, devices: int, per_device: int) -> tuple[np.ndarray, np.ndarray]:
        """``(src, rows)``: the lookups of iteration ``t`` (samples taken in order, wrapping)."""
        n = self.lengths.size
        idx = (t * devices * per_device + np.arange(devices * per_device)) % n
        lens = self.lengths[idx]
        starts = np.repeat(self.offsets[idx] - np.r_[0, np.cumsum(lens)[:-1]], lens)
        rows = self.values[starts + np.arange(lens.sum())]
        src = np.repeat(np.arange(devices * per_device) // per_device, lens)
        return src.astype(np.int64), rows


@dataclass(frozen=True)
class Profile:
    """A plan's view of the table: ``counts`` (lookups per row), ``probability`` (each row's
    share of a lookup, [`estimate_probability`][]) and ``lookups`` (per device per iteration)."""

    counts: np.ndarray
    probability: np.ndarray
    lookups: float


def replay_in_profile(samples: int, per_iteration: int, profiled: int, replayed: int) -> float:
    """The share of the replayed samples that the profile read too: iterations take the split's
    samples in order and wrap around, so a split shorter than ``profiled + replayed``
    iterations replays part of the profile (no longer a held-out replay)."""
    seen = np.zeros(samples, dtype=bool)
    seen[np.arange(profiled * per_iteration) % samples] = True
    start = profiled * per_iteration
    return float(seen[np.arange(start, start + replayed * per_iteration) % samples].mean())


def replay_unseen(data: SequenceLookups, counts: np.ndarray, iterations: range, devices: int,
                  per_device: int) -> float:
    """The share of the replayed lookups that fall on rows the profile never saw (``counts``
    0), ``1 -`` the profile's coverage. A plan made from the profile cannot single those rows
    out: they stay row-wise over all devices, as in RW, so about ``1 -`` this share bounds the
    inter-node reduction any profile-driven plan reaches (the ceiling the report draws)."""
    ids = np.concatenate([data.iteration(t, devices, per_device)[1] for t in iterations])
    return float((counts[ids] == 0).mean())


class LookupSource:
    """Where a plan's profile and its replay come from (see the module docstring).

    Attributes:
        data: the replayed samples ([`SequenceLookups.iteration`][] of ``replay``'s iterations).
        replay: the replayed iterations.
        per_device: samples per device per iteration.
    """

    data: SequenceLookups
    replay: range
    per_device: int

    def profile(self, devices: int) -> Profile:
        """The profile a plan at ``devices`` devices is made from."""
        raise NotImplementedError

    def replay_in_profile(self, devices: int) -> float:
        """The share of the replayed samples at ``devices`` devices the profile read."""
        raise NotImplementedError

    def unseen(self, profile: Profile, devices: int) -> float:
        """The share of the replayed lookups at ``devices`` on rows ``profile`` never saw."""
        return replay_unseen(self.data, profile.counts, self.replay, devices, self.per_device)


class SplitSource(LookupSource):
    """A train split: the first ``profile_batches`` iterations at each device count profile,
    the next ``replay_batches`` replay.

    Args:
        data: the split's sequence lookups.
        per_device: samples per device per iteration.
        profile_batches: iterations profiled.
        replay_batches: iterations replayed after them.
        estimator: [`estimate_probability`][]'s estimator.
    """

    def __init__(self, data: SequenceLookups, per_device: int, profile_batches: int,
                 replay_batches: int, estimator: str) -> None:
        self.data, self.per_device, self.estimator = data, per_device, estimator
        self.batches = profile_batches
        self.replay = range(profile_batches, profile_batches + replay_batches)

    def profile(self, devices: int) -> Profile:
        """The first ``profile_batches`` iterations of ``devices`` x ``per_device`` samples;
        the unseen rows' share is [`missing_mass`][]."""
        profile = [self.data.iteration(t, devices, self.per_device)[1]
                   for t in range(self.batches)]
        counts = np.bincount(np.concatenate(profile), minlength=self.data.rows)
        probability = estimate_probability(counts, self.estimator,
                                           missing_mass(profile, self.data.rows))
        return Profile(counts, probability, float(np.mean([r.size for r in profile])) / devices)

    def replay_in_profile(self, devices: int) -> float:
        """[`replay_in_profile`][] of the split at ``devices``."""
        return replay_in_profile(self.data.lengths.size, devices * self.per_device,
                                 self.batches, len(self.replay))


class StreamSource(LookupSource):
    """A generator's samples: profiles of the first ``k`` iterations of ``iteration_samples``
    samples for every swept ``k``, and the samples after the longest, replayed.

    Args:
        profiles: the profile of each swept length (iterations).
        committed: the length whose profile every plan is made from.
        data: the replayed samples.
        per_device: samples per device per iteration.
        replay_batches: iterations replayed.
        iteration_samples: samples per profiled iteration.
    """

    def __init__(self, profiles: dict[int, Profile], committed: int, data: SequenceLookups,
                 per_device: int, replay_batches: int, iteration_samples: int) -> None:
        self.profiles, self.committed = profiles, committed
        self.data, self.per_device = data, per_device
        self.replay = range(replay_batches)
        self.iteration_samples = iteration_samples

    def profile(self, devices: int) -> Profile:
        """The committed profile, its lookups per device at ``devices``: the same samples
        whatever the device count."""
        return self.at(self.committed, devices)

    def at(self, iterations: int, devices: int) -> Profile:
        """The profile of the first ``iterations`` iterations (its lookups per device: a
        device reads ``per_device`` samples whatever ``devices``)."""
        p = self.profiles[iterations]
        return Profile(p.counts, p.probability, p.lookups * self.per_device)

    def replay_in_profile(self, devices: int) -> float:
        """0, or 1 where the replay would wrap (the source holds too few replayed samples)."""
        return float(len(self.replay) * devices * self.per_device > self.data.lengths.size)


def stream_source(chunks: Iterator[tuple[np.ndarray, np.ndarray]], rows: int, *,
                  iteration_samples: int, profile_lengths: Sequence[int], committed: int,
                  replay_samples: int, per_device: int, replay_batches: int, estimator: str,
                  progress: Callable[[int], None] = lambda n: None) -> StreamSource:
    """A [`StreamSource`][] from a generator's ``(values, lengths)`` chunks of histories.

    The first ``max(profile_lengths)`` iterations of ``iteration_samples`` samples are counted
    (the profile of each length a snapshot on the way), the next ``replay_samples`` samples
    kept for the replay. ``progress`` is told the samples read after every chunk.

    Raises:
        ValueError: a length is not positive, ``committed`` is not one of them, or the chunks
            end before the profile and the replay are read.
    """
    if not profile_lengths or min(profile_lengths) < 1 or committed not in profile_lengths:
        raise ValueError(f"profile lengths {list(profile_lengths)} (committed {committed}): "
                         "positive, the committed one among them")
    counter, profiles = ProfileCounter(rows), {}
    wanted, longest = set(profile_lengths), max(profile_lengths)
    carry_values, carry_lengths = np.zeros(0, np.int64), np.zeros(0, np.int64)
    kept: list[tuple[np.ndarray, np.ndarray]] = []  # the replay's samples
    kept_samples = read = 0
    for chunk_values, chunk_lengths in chunks:
        read += chunk_lengths.size
        progress(read)
        values = np.concatenate([carry_values, chunk_values])
        lengths = np.concatenate([carry_lengths, chunk_lengths])
        ends = np.r_[0, np.cumsum(lengths)]
        first = 0  # the first sample of this chunk not yet counted
        while counter.iterations < longest and lengths.size - first >= iteration_samples:
            counter.add(values[ends[first]:ends[first + iteration_samples]])
            first += iteration_samples
            if counter.iterations in wanted:
                counts = counter.counts.copy()
                profiles[counter.iterations] = Profile(
                    counts, estimate_probability(counts, estimator, counter.missing_mass()),
                    counter.lookups / (counter.iterations * iteration_samples))
        if counter.iterations < longest:
            carry_values, carry_lengths = values[ends[first]:], lengths[first:]
            continue
        carry_values, carry_lengths = np.zeros(0, np.int64), np.zeros(0, np.int64)
        last = min(lengths.size, first + replay_samples - kept_samples)
        kept.append((values[ends[first]:ends[last]], lengths[first:last]))
        kept_samples += last - first
        if kept_samples >= replay_samples:
            break
    if counter.iterations < longest or kept_samples < replay_samples:
        raise ValueError(f"the stream ended after {read:,} samples: the profile needs "
                         f"{longest * iteration_samples:,} and the replay {replay_samples:,} "
                         "more")
    data = SequenceLookups(np.concatenate([v for v, _ in kept]).astype(np.int64),
                           np.concatenate([n for _, n in kept]).astype(np.int64), rows)
    return StreamSource(profiles, committed, data, per_device, replay_batches, iteration_samples)
