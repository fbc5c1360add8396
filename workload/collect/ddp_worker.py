"""One rank of ``python -m workload.collect --model M:F --world N``: a plain DDP training loop.

Started by workload.collect.world with torchrun's environment (RANK, WORLD_SIZE, MASTER_ADDR,
MASTER_PORT); the step hooks of step_hook.py profile its last step, as they would any script's.
Exit 2 for a model that cannot be built (the parent reports the message), 1 for anything else.
"""
from __future__ import annotations

import argparse
import os
import sys

from network.errors import InputError


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m workload.collect.ddp_worker")
    p.add_argument("--model", required=True)
    p.add_argument("--batch-size", type=int, required=True)
    p.add_argument("--backend", choices=("gloo", "nccl"), required=True)
    p.add_argument("--iterations", type=int, required=True)
    p.add_argument("--device", choices=("cpu", "cuda"), required=True)
    p.add_argument("--loss", default=None)
    p.add_argument("--optimizer", default=None)
    args = p.parse_args(argv)
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    from workload.collect.profile_step import _prepare
    from workload.collect.spec import load_model_spec
    from workload.collect.step_hook import install_from_env

    rank = int(os.environ["RANK"])
    device = f"cuda:{int(os.environ.get('LOCAL_RANK', rank)) % max(1, torch.cuda.device_count())}" \
        if args.device == "cuda" else "cpu"
    if args.device == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group(args.backend)
    try:
        torch.manual_seed(0)
        spec = load_model_spec(args.model, args.batch_size)
        # the optimizer holds the module's parameters, which DDP wraps without copying
        model, inputs, target, loss_fn, opt = _prepare(torch, spec, device, args.loss, args.optimizer, args.model)
        ddp = DistributedDataParallel(model, device_ids=[device] if args.device == "cuda" else None)
        install_from_env()
        for _ in range(args.iterations):
            opt.zero_grad()
            loss_fn(ddp(*inputs), target).backward()
            opt.step()
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # every file is written and closed; skip torch's interpreter teardown, which takes seconds
    os._exit(code)
