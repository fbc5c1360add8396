"""Generate Chakra workloads from a description of the job (no trace needed).

    python -m workload.generate megatron --num-layers 24 --hidden-size 2048 --num-attention-heads 16 \\
        --seq-length 2048 --global-batch-size 64 --micro-batch-size 2 \\
        --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --data-parallel-size 2 \\
        --gpu a100 -o out/gpt
    python -m system.main --workload out/gpt --network out/gpt.network.yml --system out/gpt.system.json

Exit codes: 0 done, 2 bad input (one paragraph naming the flag and what it needs), 1 a bug in us.
"""
from __future__ import annotations

import argparse
import enum
import sys
import traceback

from network.errors import InputError
from workload.megatron.cli import add_megatron_parser, run_megatron


class ExitCode(enum.IntEnum):
    OK = 0
    INTERNAL_ERROR = 1  #: a bug in us
    BAD_INPUT = 2  #: an InputError: the flag or file, and what was expected


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:
        self.print_usage(sys.stderr)
        raise SystemExit(f"{self.prog}: error: {message}")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = _Parser(prog="python -m workload.generate", description="Generate Chakra workloads from a job description.")
    sub = parser.add_subparsers(dest="kind", required=True, parser_class=_Parser)
    add_megatron_parser(sub)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> ExitCode:
    try:
        args = parse_args(argv)
    except SystemExit as e:
        if isinstance(e.code, str):
            print(e.code, file=sys.stderr)
            return ExitCode.BAD_INPUT
        return ExitCode.OK if e.code in (0, None) else ExitCode.BAD_INPUT
    try:
        g = run_megatron(args)
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return ExitCode.BAD_INPUT
    except Exception as e:  # noqa: BLE001 -- the edge: a bug in us is exit 1, one line
        if args.debug:
            traceback.print_exc()
        print(f"internal error: {type(e).__name__}: {e} (rerun with --debug for the traceback)", file=sys.stderr)
        return ExitCode.INTERNAL_ERROR
    p = g.prefix
    if g.representatives is not None:
        print(f"{p}.{{{','.join(map(str, g.representatives))}}}.et and {p}.orbits.json: {g.ranks} ranks as "
              f"{len(g.representatives)} per-orbit file(s), {sum(g.nodes_per_stage)} nodes, {g.et_bytes / 2**20:.1f} MiB")
    else:
        print(f"{p}.{{0..{g.ranks - 1}}}.et: {g.ranks} ranks, {sum(g.nodes_per_stage)} nodes over "
              f"{len(g.nodes_per_stage)} stage template(s), {g.et_bytes / 2**20:.1f} MiB")
    print(f"run: python -m system.main --workload {p} --network {p}.network.yml --system {p}.system.json")
    return ExitCode.OK


def console_main() -> None:
    sys.exit(main())


if __name__ == "__main__":
    console_main()
