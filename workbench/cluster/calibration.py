"""The committed machine calibration the clock reads: compute per model, software cost per width.

The ``calibrate`` stage ([`workbench.experiments.calibrate`][]) measures, on this machine,

* each configured model's forward + backward + optimizer time at several per-worker batch sizes
  and fits ``seconds = per_batch + per_sample x samples`` (least squares);
* the per-message and per-row CPU cost of a parameter-server exchange at each embedding width
  the experiments use ([`workbench.cluster.software_cost`][]);

and writes them to ``results/calibration/calibration.json``:

    {"machine": {...}, "settings": {...},
     "compute":  {"wdl/D128/dense13/sparse26": {"fingerprint": "...", "per_batch_s": ...,
                                               "per_sample_s": ..., "batch_sizes": [...],
                                               "seconds": [...]}, ...},
     "software": {"D128": {"client_message_s": ..., "client_row_s": ..., ...}, ...}}

The pipeline reads the committed file, so every stage is deterministic; recalibrating is the
explicit ``calibrate`` stage (``make calibrate``), the only way the pipeline's file changes. A
dataset picked on the command line (``--dataset NAME`` or ``dataset=...``: one's own data) is
calibrated into its own file, never into the pipeline's:

    results/calibration/calibration.json          the pipeline's (DVC, frozen; make calibrate)
    results/calibrate/<NAME>/calibration.json     calibrate --dataset NAME (or dataset=...)

and a stage run on a picked dataset reads that dataset's own file when there is one, else the
pipeline's (the same model on the same dataset shape costs the same). Calibrating a picked dataset
again keeps what the earlier runs measured and this one did not: a compute entry measured with
another model configuration (another profile's model, say) moves to ``kept`` (by key, one entry
per fingerprint), so running the ci profile after the default one (or the reverse) never takes
away the other's calibration; the pipeline's file is replaced whole and has no ``kept``.

A model whose configuration changed since the calibration (its fingerprint differs) or a width
that was never measured is an error naming the command that fixes it, never a silent fallback.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.cluster.time_model import ComputeCost, SoftwareCost
from workbench.utils.paths import check_name, inside
from workbench.utils.validation import ConfigError

CALIBRATION_FILE = "calibration.json"
#: ``results/<PIPELINE_DIR>``: the pipeline's calibration (a frozen DVC stage's output).
PIPELINE_DIR = "calibration"
#: ``results/<OWN_DIR>/<dataset>``: a picked dataset's own calibration.
OWN_DIR = "calibrate"
RECALIBRATE = ("python -m workbench.stages calibrate with this stage's own --dataset or dataset= "
               "overrides (on your data it writes results/calibrate/<dataset>/ and leaves the "
               "pipeline's alone; for the pipeline's own datasets: make calibrate)")


def pipeline_dir(results: Path) -> Path:
    """``results/calibration``: the pipeline's calibration directory."""
    return Path(results) / PIPELINE_DIR


def own_dir(results: Path, dataset: str) -> Path:
    """``results/calibrate/<dataset>``: where calibrating a picked dataset writes."""
    return inside(Path(results) / OWN_DIR, check_name("dataset.name", dataset),
                  key="dataset.name", guard=results)


def calibration_dir(results: Path, dataset: str | None = None) -> Path:
    """The calibration a stage reads: ``dataset``'s own when it has one, else the pipeline's.

    Args:
        results: the results root (``paths.results``).
        dataset: a dataset picked on the command line (None: a pipeline run, which reads only
            the pipeline's calibration).
    """
    if dataset is not None:
        own = own_dir(results, dataset)
        if (own / CALIBRATION_FILE).is_file():
            return own
    return pipeline_dir(results)


def compute_key(model: str, dim: int, n_dense: int, n_sparse: int) -> str:
    """The calibration key of a model at a width on a dataset shape."""
    return f"{model}/D{dim}/dense{n_dense}/sparse{n_sparse}"


def software_key(dim: int) -> str:
    """The calibration key of the software cost at embedding width ``dim``."""
    return f"D{dim}"


@dataclass(frozen=True)
class Calibration:
    """A loaded calibration file.

    Attributes:
        path: where it was read from (named in errors).
        machine: CPU, threads and library versions it was measured with.
        settings: batch sizes, repeats, threads of the measurement.
        compute: model timings by [`compute_key`][].
        software: software costs by [`software_key`][].
        kept: an own calibration's earlier compute entries of other model configurations, by
            key (see the module docstring); empty in the pipeline's.
    """

    path: Path
    machine: dict[str, Any] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)
    compute: dict[str, dict[str, Any]] = field(default_factory=dict)
    software: dict[str, dict[str, Any]] = field(default_factory=dict)
    kept: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    @classmethod
    def load(cls, directory: Path) -> Calibration:
        """Read ``directory/calibration.json``.

        Raises:
            ConfigError: the file is missing or unreadable (names the command that writes it).
        """
        path = Path(directory) / CALIBRATION_FILE
        if not path.exists():
            raise ConfigError(f"{path} not found: the clock needs this machine's calibration "
                              f"(cluster.compute / cluster.software = calibrated); run "
                              f"{RECALIBRATE}, or set cluster.compute=flops and "
                              "cluster.software=off")
        try:
            data = json.loads(path.read_text())
            return cls(path=path, machine=data["machine"], settings=data["settings"],
                       compute=data["compute"], software=data["software"],
                       kept=data.get("kept", {}))
        except (json.JSONDecodeError, KeyError, TypeError) as err:
            raise ConfigError(f"{path}: not a calibration file ({err}); rerun "
                              f"{RECALIBRATE}") from None

    def compute_cost(self, key: str, fingerprint: str) -> ComputeCost:
        """The calibrated compute cost of ``key`` measured with a model of ``fingerprint``.

        Raises:
            ConfigError: never measured, or measured with a different model configuration.
        """
        entry = self.compute.get(key)
        entry = next((e for e in self.kept.get(key, []) if e["fingerprint"] == fingerprint),
                     entry)
        if entry is None:
            raise ConfigError(f"{self.path} has no compute timing for {key} (measured: "
                              f"{sorted(self.compute)}); run {RECALIBRATE}")
        if entry["fingerprint"] != fingerprint:
            raise ConfigError(f"{self.path}: {key} was measured with a different model "
                              f"configuration (fingerprint {entry['fingerprint']} != "
                              f"{fingerprint}); run {RECALIBRATE}")
        return ComputeCost(float(entry["per_batch_s"]), float(entry["per_sample_s"]),
                           f"calibrated on {self.machine.get('cpu', 'this machine')}, "
                           f"{self.settings.get('threads', 1)} thread(s)")

    def software_cost(self, dim: int) -> SoftwareCost:
        """The measured software cost at embedding width ``dim``.

        Raises:
            ConfigError: the width was never measured.
        """
        entry = self.software.get(software_key(dim))
        if entry is None:
            raise ConfigError(f"{self.path} has no software cost for D = {dim} (measured: "
                              f"{sorted(self.software)}); run {RECALIBRATE}")
        return SoftwareCost(float(entry["client_message_s"]), float(entry["client_row_s"]),
                            float(entry["server_message_s"]), float(entry["server_row_s"]),
                            source=f"measured at D = {dim}")

    def keeping(self, earlier: Calibration) -> Calibration:
        """This run's measurements with what ``earlier`` (the same own file, before) measured
        and this run did not: its other keys and widths as they were, and its entries of a
        key this run measured with another fingerprint in ``kept`` (one per fingerprint)."""
        compute = {**earlier.compute, **self.compute}
        software = {**earlier.software, **self.software}
        kept: dict[str, list[dict[str, Any]]] = {}
        for key in sorted({*earlier.kept, *self.kept, *earlier.compute}):
            entries = [*self.kept.get(key, []), *earlier.kept.get(key, [])]
            if key in earlier.compute:
                entries.insert(0, earlier.compute[key])
            current = compute[key]["fingerprint"]
            unique = {e["fingerprint"]: e for e in reversed(entries)
                      if e["fingerprint"] != current}
            if unique:
                kept[key] = [unique[f] for f in sorted(unique)]
        return Calibration(path=self.path, machine=self.machine, settings=self.settings,
                           compute=dict(sorted(compute.items())),
                           software=dict(sorted(software.items())), kept=kept)

    def to_dict(self) -> dict[str, Any]:
        """The file's content (``kept`` only when it holds something)."""
        out = {"machine": self.machine, "settings": self.settings, "compute": self.compute,
               "software": self.software}
        return {**out, "kept": self.kept} if self.kept else out
