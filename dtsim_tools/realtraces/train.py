#!/usr/bin/env python
"""Small multi-rank training jobs for the real-trace evaluation (dtsim_tools/realtraces/harness.py).

Run under torchrun with gloo on CPU::

    torchrun --standalone --nproc-per-node 2 dtsim_tools/realtraces/train.py --model cnn_bn --steps 8

Models (each a few ms to ~200 ms per step on a 2-core machine, 1 intra-op thread per rank):

* ``lstm``          LSTM + linear head, DDP
* ``cnn_bn``        CNN with BatchNorm, DDP (the BN buffers are broadcast every forward)
* ``embbag_sparse`` EmbeddingBag(sparse=True) + MLP, DDP (sparse all-reduce of the table's gradient)
* ``embbag_dense``  the same with a dense table
* ``fsdp1``         MLP under torch.distributed.fsdp.FullyShardedDataParallel, one unit per layer
* ``fsdp2``         MLP under torch.distributed.fsdp.fully_shard, one unit per layer
* ``grad_accum``    MLP, DDP, 2 micro-batches per step, the first under ``no_sync``
* ``two_groups``    MLP, DDP, plus one all-reduce per step on a ``new_group`` pair ([0,1], [2,3], ...)
* ``pipeline``      one MLP stage per rank, 4 micro-batches forward then backward, activations and
                    gradients passed with blocking ``dist.send`` / ``dist.recv`` (no collective)

One optimizer step per training step, so ``workload.collect run --step K`` profiles step K.
``--timing-dir DIR`` writes ``DIR/timing.{rank}.json``: every step's wall time (perf_counter).
The script needs nothing from dtsim.
"""
from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

MODELS = ("lstm", "cnn_bn", "embbag_sparse", "embbag_dense", "fsdp1", "fsdp2", "grad_accum", "two_groups",
          "pipeline")
#: default batch per rank
BATCH = {"lstm": 16, "cnn_bn": 16, "embbag_sparse": 64, "embbag_dense": 64, "fsdp1": 32, "fsdp2": 32,
         "grad_accum": 32, "two_groups": 32, "pipeline": 32}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, choices=MODELS)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--batch", type=int, default=None, help="per rank; default depends on --model")
    p.add_argument("--timing-dir", type=Path, default=None)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def mlp(width: int = 512, depth: int = 3, inp: int = 256, out: int = 10) -> nn.Sequential:
    layers: list[nn.Module] = []
    d = inp
    for _ in range(depth):
        layers += [nn.Linear(d, width), nn.ReLU()]
        d = width
    layers.append(nn.Linear(d, out))
    return nn.Sequential(*layers)


class LSTMNet(nn.Module):
    def __init__(self, inp: int = 64, hidden: int = 128, out: int = 10):
        super().__init__()
        self.lstm = nn.LSTM(inp, hidden, num_layers=2, batch_first=True)
        self.head = nn.Linear(hidden, out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y, _ = self.lstm(x)
        return self.head(y[:, -1])


class CNNBN(nn.Module):
    def __init__(self, out: int = 10):
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16)
        self.c2, self.b2 = nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32)
        self.fc = nn.Linear(32 * 8 * 8, out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.b1(self.c1(x))), 2)
        x = F.max_pool2d(F.relu(self.b2(self.c2(x))), 2)
        return self.fc(x.flatten(1))


class EmbBagNet(nn.Module):
    def __init__(self, sparse: bool, rows: int = 20000, dim: int = 32, out: int = 10):
        super().__init__()
        self.emb = nn.EmbeddingBag(rows, dim, mode="sum", sparse=sparse)
        self.top = nn.Sequential(nn.Linear(dim, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                                 nn.Linear(256, out))

    def forward(self, idx: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        return self.top(self.emb(idx, offsets))


def build(model: str, world: int, rank: int):
    """(module to train, optimizer, batch maker, extra per-step hook or None)."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    extra = None
    if model == "lstm":
        net = DDP(LSTMNet())
        make = lambda b: ((torch.randn(b, 16, 64),), torch.randint(0, 10, (b,)))  # noqa: E731
    elif model == "cnn_bn":
        net = DDP(CNNBN())
        make = lambda b: ((torch.randn(b, 3, 32, 32),), torch.randint(0, 10, (b,)))  # noqa: E731
    elif model in ("embbag_sparse", "embbag_dense"):
        net = DDP(EmbBagNet(sparse=model == "embbag_sparse"))

        def make(b: int):
            per = 8
            return (torch.randint(0, 20000, (b * per,)), torch.arange(0, b * per, per)), torch.randint(0, 10, (b,))
    elif model == "fsdp1":
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

        base = mlp()
        for i, m in enumerate(base):
            if isinstance(m, nn.Linear):
                base[i] = FSDP(m, device_id=torch.device("cpu"))  # FSDP1 refuses CPU unless told
        net = FSDP(base, device_id=torch.device("cpu"))
        make = lambda b: ((torch.randn(b, 256),), torch.randint(0, 10, (b,)))  # noqa: E731
    elif model == "fsdp2":
        from torch.distributed.fsdp import fully_shard

        net = mlp()
        for m in net:
            if isinstance(m, nn.Linear):
                fully_shard(m)
        fully_shard(net)
        make = lambda b: ((torch.randn(b, 256),), torch.randint(0, 10, (b,)))  # noqa: E731
    elif model in ("grad_accum", "two_groups"):
        net = DDP(mlp())
        make = lambda b: ((torch.randn(b, 256),), torch.randint(0, 10, (b,)))  # noqa: E731
        if model == "two_groups":
            # every rank takes part in creating every group
            groups = [dist.new_group([i, i + 1]) for i in range(0, world - world % 2, 2)]
            mine = groups[rank // 2] if rank // 2 < len(groups) else None
            stat = torch.zeros(4096)

            def extra() -> None:
                if mine is not None:
                    stat.add_(1.0)
                    dist.all_reduce(stat, group=mine)
    elif model == "pipeline":
        net = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 256))
        make = lambda b: ((torch.randn(b, 256),), None)  # noqa: E731
    else:  # pragma: no cover - argparse refuses it
        raise ValueError(model)
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    return net, opt, make, extra


def pipeline_step(stage: nn.Module, inputs: list[torch.Tensor], rank: int, world: int) -> None:
    """Stage ``rank`` of a ``world``-stage pipeline: every micro-batch forward (receiving the
    activation from the stage before, sending its own on), then every one backward in reverse
    (receiving the gradient from the stage after, sending the input's back)."""
    ins, outs = [], []
    for x in inputs:
        if rank > 0:
            x = torch.empty_like(x)
            dist.recv(x, rank - 1)
        x.requires_grad_()
        y = stage(x)
        ins.append(x)
        outs.append(y)
        if rank < world - 1:
            dist.send(y.detach(), rank + 1)
    for x, y in zip(reversed(ins), reversed(outs)):
        if rank == world - 1:
            y.pow(2).mean().backward()
        else:
            grad = torch.empty_like(y)
            dist.recv(grad, rank + 1)
            y.backward(grad)
        if rank > 0:
            dist.send(x.grad.contiguous(), rank - 1)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(args.seed + rank)
    batch = args.batch or BATCH[args.model]
    net, opt, make, extra = build(args.model, world, rank)
    micro = {"grad_accum": 2, "pipeline": 4}.get(args.model, 1)
    walls: list[float] = []
    for _ in range(args.steps):
        data = [make(batch) for _ in range(micro)]
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        if args.model == "pipeline":
            pipeline_step(net, [inputs[0] for inputs, _ in data], rank, world)
        for k, (inputs, target) in enumerate(data if args.model != "pipeline" else ()):
            if k < micro - 1:
                with net.no_sync():
                    F.cross_entropy(net(*inputs), target).backward()
            else:
                F.cross_entropy(net(*inputs), target).backward()
        if extra is not None:
            extra()
        opt.step()
        walls.append(time.perf_counter() - t0)
    if args.timing_dir is not None:
        args.timing_dir.mkdir(parents=True, exist_ok=True)
        out = {"rank": rank, "world": world, "model": args.model, "batch": batch, "micro_batches": micro,
               "step_wall_s": walls, "params": sum(p.numel() for p in net.parameters()),
               "threads": torch.get_num_threads(), "torch": torch.__version__, "pid": os.getpid()}
        (args.timing_dir / f"timing.{rank}.json").write_text(json.dumps(out, indent=1))
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
