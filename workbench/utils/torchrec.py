r"""TorchRec beside the pinned torch: what ``make torchrec`` installs, and the check of the pair.

TorchRec and FBGEMM release with matching numbers, and fbgemm_gpu's own compatibility table
(``_fbgemm_torch_compat_table`` in its ``__init__.py``) maps fbgemm ``1.8`` to torch ``2.13``, the
pinned torch. torchrec's metadata requires the distribution ``fbgemm-gpu``, the CUDA build, which
fails to load beside the CPU torch (``libtorch_cuda.so``); the CPU build ``fbgemm-gpu-cpu``
provides the same package folder, so the extra ``workbench[torchrec]`` lists it and torchrec goes
in with ``--no-deps``:

    make torchrec = pip install 'workbench[torchrec]'        fbgemm-gpu-cpu 1.8.0, tensordict, ...
                    pip install --no-deps torchrec==1.8.0     TORCHREC
                    python -m workbench.utils.torchrec        check_install(): the pair, or the fix

Two layers use TorchRec, each importing it only when called: ``sparse.torchrec_interop`` (KJT and
IKJT conversions) and ``sharding.torchrec_plan`` (TorchRec's sharding planner).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType

from workbench.utils.errors import UserError

__all__ = ["INSTALL", "TORCHREC", "TorchRecUnavailable", "InstallCheck", "check_install",
           "load_torchrec"]

#: The TorchRec release that pairs with the extra's fbgemm-gpu-cpu 1.8.0 (matching numbers).
TORCHREC = "torchrec==1.8.0"
#: The commands that install TorchRec beside the pinned torch (what ``make torchrec`` runs).
INSTALL = (f"make torchrec (or: pip install 'workbench[torchrec]' && pip install --no-deps "
           f"'{TORCHREC}')")


class TorchRecUnavailable(UserError, ImportError):
    """TorchRec is not installed, or is installed but does not load against this torch."""


def load_torchrec(module: str = "torchrec") -> ModuleType:
    """Import ``module`` of TorchRec.

    Raises:
        TorchRecUnavailable: TorchRec is absent (the message gives [`INSTALL`][]) or fails to
            load (the message names the error: TorchRec's package imports fbgemm_gpu, whose
            compiled operators must match the installed torch).
    """
    import torch

    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as err:
        if err.name and err.name.split(".")[0] == "torchrec":
            raise TorchRecUnavailable(f"TorchRec is not installed: {INSTALL}") from None
        raise TorchRecUnavailable(f"TorchRec is installed but does not load ({err}); install "
                                  f"the versions the extra pins: {INSTALL}") from None
    except (ImportError, OSError, RuntimeError) as err:
        raise TorchRecUnavailable(
            f"TorchRec is installed but does not load against torch {torch.__version__} "
            f"({str(err).splitlines()[0][:200]}): TorchRec imports fbgemm_gpu, whose operators "
            "must be built for this torch") from None


def _major_minor(version: str) -> str:
    return ".".join(version.split("+")[0].split(".")[:2])


@dataclass(frozen=True)
class InstallCheck:
    """What is installed: the versions the pair is checked on.

    Attributes:
        torch: torch's version (``2.13.0+cpu``).
        fbgemm: fbgemm_gpu's version.
        variant: fbgemm_gpu's build (``cpu``, ``cuda``, ``rocm``).
        table_torch: the torch release fbgemm_gpu's compatibility table pairs with ``fbgemm``.
        torchrec: torchrec's version.
    """

    torch: str
    fbgemm: str
    variant: str
    table_torch: str
    torchrec: str

    def line(self) -> str:
        """One line: the pair and where it comes from."""
        return (f"torchrec {self.torchrec} + fbgemm_gpu {self.fbgemm} ({self.variant}) on torch "
                f"{self.torch}: fbgemm's compatibility table pairs fbgemm "
                f"{_major_minor(self.fbgemm)} with torch {self.table_torch}")


def _distribution(name: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def check_install() -> InstallCheck:
    """Check that TorchRec is installed as ``make torchrec`` installs it, and load it.

    The CPU build of fbgemm_gpu (``__variant__ == "cpu"``), no CUDA ``fbgemm-gpu`` distribution
    beside it, fbgemm's compatibility table pairing its release with the installed torch, and
    torchrec's release number equal to fbgemm's.

    Raises:
        TorchRecUnavailable: one line naming what is wrong and [`INSTALL`][].
    """
    import torch

    torchrec_version = _distribution("torchrec")
    if torchrec_version is None:
        raise TorchRecUnavailable(f"TorchRec is not installed: {INSTALL}")
    cuda = _distribution("fbgemm-gpu")
    if cuda is not None:
        raise TorchRecUnavailable(
            f"the CUDA build fbgemm-gpu {cuda} is installed (it shares fbgemm_gpu's folder with "
            f"the CPU build): pip uninstall -y fbgemm-gpu fbgemm-gpu-cpu, then {INSTALL}")
    try:
        fbgemm_gpu = importlib.import_module("fbgemm_gpu")
    except (ImportError, OSError, RuntimeError) as err:
        raise TorchRecUnavailable(f"fbgemm_gpu does not load against torch {torch.__version__} "
                                  f"({str(err).splitlines()[0][:200]}): {INSTALL}") from None
    version = str(getattr(fbgemm_gpu, "__version__", "?"))
    variant = str(getattr(fbgemm_gpu, "__variant__", "?"))
    table = getattr(fbgemm_gpu, "_fbgemm_torch_compat_table", {})
    paired = str(table.get(_major_minor(version), "none"))
    found = InstallCheck(torch.__version__, version, variant, paired, torchrec_version)
    if variant != "cpu":
        raise TorchRecUnavailable(f"fbgemm_gpu {version} is the {variant} build, not cpu: "
                                  f"pip uninstall -y fbgemm-gpu fbgemm-gpu-cpu, then {INSTALL}")
    if paired != _major_minor(torch.__version__):
        raise TorchRecUnavailable(f"fbgemm_gpu {version} pairs with torch {paired} in its "
                                  f"compatibility table, this is torch {torch.__version__}: "
                                  f"{INSTALL}")
    if _major_minor(torchrec_version) != _major_minor(version):
        raise TorchRecUnavailable(f"torchrec {torchrec_version} does not match fbgemm_gpu "
                                  f"{version} (they release with matching numbers): {INSTALL}")
    try:
        importlib.import_module("torchrec")
    except (ImportError, OSError, RuntimeError) as err:
        raise TorchRecUnavailable(f"torchrec {torchrec_version} does not load against torch "
                                  f"{torch.__version__} ({str(err).splitlines()[0][:200]}): "
                                  f"{INSTALL}") from None
    return found


def main() -> None:
    """``python -m workbench.utils.torchrec``: print the pair, or exit 2 with the fix.

    ``--pin`` prints the torchrec requirement `make torchrec` installs ([`TORCHREC`][]).
    """
    import sys

    from workbench.utils.errors import one_line

    if sys.argv[1:] == ["--pin"]:
        print(TORCHREC)
        return
    try:
        print(check_install().line())
    except TorchRecUnavailable as err:
        print(one_line(err), file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
