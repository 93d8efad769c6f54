"""The ``workbench`` console command: one entry point for every ``python -m`` command line.


    workbench stage <stage> [options] [overrides]   = python -m workbench.stages ...
    workbench replay {cache,dispatch} ...           = python -m workbench.replay ...
    workbench config {dump,check} [overrides] ...   = python -m workbench.config ...
    workbench sweep [--multirun] [overrides]        = python -m workbench.sweep ...
    workbench network [overrides] [--seconds S]     the cluster's edge network, held
    workbench check --results DIR                   = python -m workbench.claims.check ...

Everything after the subcommand is handed, unchanged, to that module's own parser
(``workbench stage --help`` is the stages' help). Relative paths in the configuration are
relative to the project root ([`workbench.utils.paths`][]): ``$WORKBENCH_ROOT``, else the source
checkout the package runs from, else the working directory.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

import workbench


@contextmanager
def _argv(command: str, rest: list[str]) -> Iterator[None]:
    """``sys.argv`` as the forwarded module sees it (its usage lines say ``workbench <command>``;
    Hydra reads its overrides from ``sys.argv``)."""
    saved = sys.argv
    sys.argv = [f"workbench {command}", *rest]
    try:
        yield
    finally:
        sys.argv = saved


def _stage(rest: list[str]) -> None:
    from workbench.stages import main

    main(rest, prog="workbench stage")


def _replay(rest: list[str]) -> None:
    from workbench.replay import main

    main(rest)


def _config(rest: list[str]) -> None:
    from workbench.config import main

    main(rest)


def _network(rest: list[str]) -> None:
    from workbench.cluster.edge_network import NetworkSpec, hold
    from workbench.config import load
    from workbench.utils.errors import UserError, one_line

    parser = argparse.ArgumentParser(
        prog="workbench network",
        description="Build the edge network of the configured cluster in network namespaces "
                    "(a parameter-server node and one node per worker, links shaped by the "
                    "kernel), probe each link, and hold it until Ctrl-C; everything is torn "
                    "down after. Needs root or CAP_NET_ADMIN.")
    parser.add_argument("overrides", nargs="*",
                        help="config overrides, e.g. cluster=edge_tiers cluster.workers=4")
    parser.add_argument("--dispatcher", action="store_true", help="add a dispatcher node")
    parser.add_argument("--seconds", type=float, default=None,
                        help="tear down after this many seconds (default: at Ctrl-C)")
    parser.add_argument("--no-probe", action="store_true", help="skip the link probes")
    args = parser.parse_args(rest)
    try:
        cfg = load(args.overrides)
        hold(NetworkSpec.from_cluster(cfg.cluster, dispatcher=args.dispatcher), args.seconds,
             probe=not args.no_probe, title=f"edge network of cluster {cfg.cluster.name}")
    except UserError as err:
        print(one_line(err), file=sys.stderr)
        sys.exit(2)


def _check(rest: list[str]) -> None:
    from workbench.claims.check import main

    sys.exit(main(rest))


def _sweep(rest: list[str]) -> None:
    from workbench.sweep import main

    main()  # a Hydra main: it parses sys.argv itself


#: Subcommand -> (one-line help, forwarder).
COMMANDS: dict[str, tuple[str, Callable[[list[str]], None]]] = {
    "stage": ("run a pipeline stage: <stage> [options] [overrides]", _stage),
    "replay": ("replay your own traces: cache | dispatch", _replay),
    "config": ("compose the configuration: dump [-o params.yaml] | check", _config),
    "sweep": ("Hydra multirun of a stage: --multirun +stage=<name> key=a,b", _sweep),
    "network": ("build the cluster's edge network (namespaces, kernel-shaped links) and hold "
                "it", _network),
    "check": ("judge a results folder against the register and the committed report: "
              "--results DIR", _check),
}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="workbench",
        description="DLRM training-systems workbench: one command for its command lines "
                    "(workbench stage|replay|config|sweep = python -m "
                    "workbench.stages|replay|config|sweep).",
        epilog="Everything after a subcommand goes to that command's own parser: "
               "`workbench <command> --help` shows its options. Relative paths of the "
               "configuration are relative to the project root: $WORKBENCH_ROOT, else the "
               "source checkout the package runs from, else the working directory.")
    parser.add_argument("--version", action="version",
                        version=f"%(prog)s {workbench.__version__}")
    sub = parser.add_subparsers(title="commands", dest="command", metavar="<command>",
                                required=True)
    for name, (text, _) in COMMANDS.items():
        sub.add_parser(name, help=text, add_help=False)
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of the ``workbench`` console script."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] not in COMMANDS:
        parser = _parser()
        parser.parse_args(args)  # --help, --version, or exits 2 naming the bad command
        parser.print_help()
        sys.exit(2)
    command, rest = args[0], args[1:]
    with _argv(command, rest):
        COMMANDS[command][1](rest)


if __name__ == "__main__":
    main()
