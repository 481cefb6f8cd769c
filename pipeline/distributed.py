"""Running under ``torchrun``: one process per device, ``torch.distributed`` between them.

torchrun (directly, or started by Slurm's ``srun`` with a c10d rendezvous) sets ``RANK``,
``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR`` and ``MASTER_PORT``; :func:`setup` reads them. With
``WORLD_SIZE`` unset or 1 it describes the single process and makes no process group. Each rank
works on ``cuda:LOCAL_RANK`` with the NCCL backend when the device is CUDA, on the CPU with gloo
otherwise. All ranks must see the same files (a shared filesystem between nodes).
"""
from __future__ import annotations

import atexit
import datetime
import os
from dataclasses import dataclass

import torch

from phrase_rescore.core.errors import PhraseRescoreError

from .device import resolve_device

#: how long a collective waits for the slowest rank (torch's default is 30 minutes): a relaunched job's
#: rank whose share was already done waits at the end while the others finish theirs, maybe for days
TIMEOUT = datetime.timedelta(days=30)


def env_world_size() -> int:
    """``WORLD_SIZE`` as torchrun sets it; 1 outside torchrun."""
    try:
        return max(1, int(os.environ.get("WORLD_SIZE", "1")))
    except ValueError:
        raise PhraseRescoreError(f"WORLD_SIZE={os.environ['WORLD_SIZE']!r} is not a number") from None


@dataclass(frozen=True)
class Dist:
    """This process's place in the job: ``rank`` of ``world_size``, its ``device``."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = torch.device("cpu")

    @property
    def enabled(self) -> bool:
        """More than one process: collectives are real."""
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        """Rank 0: the one that writes shared outputs and shows progress."""
        return self.rank == 0

    def barrier(self) -> None:
        if self.enabled:
            torch.distributed.barrier(**({"device_ids": [self.device.index]} if self.device.type == "cuda" else {}))

    def all_reduce_sum(self, values) -> list[float]:
        """The element-wise sum over ranks of a list of numbers, in float64 (identical on every rank)."""
        if not self.enabled:
            return [float(v) for v in values]
        t = torch.tensor([float(v) for v in values], dtype=torch.float64, device=self.device)
        torch.distributed.all_reduce(t)
        return t.tolist()

    def broadcast(self, values) -> list[float]:
        """Rank 0's list of numbers (float64), on every rank: for decisions all ranks must take alike."""
        if not self.enabled:
            return [float(v) for v in values]
        t = torch.tensor([float(v) for v in values], dtype=torch.float64, device=self.device)
        torch.distributed.broadcast(t, src=0)
        return t.tolist()

    def data_parallel(self, model: torch.nn.Module, method: str = "forward"):
        """``model.<method>`` as a callable whose backward averages the gradients over the ranks
        (DistributedDataParallel's all-reduce, overlapped with the backward pass); with one process,
        the method itself. DDP broadcasts rank 0's weights once, here, so all ranks start alike."""
        if not self.enabled:
            return getattr(model, method)
        from torch.nn.parallel import DistributedDataParallel

        return DistributedDataParallel(_Method(model, method),
                                       device_ids=[self.device.index] if self.device.type == "cuda" else None)

    def broadcast_object(self, obj):
        """Rank 0's picklable ``obj`` on every rank."""
        if not self.enabled:
            return obj
        box = [obj]
        torch.distributed.broadcast_object_list(box, src=0, device=self.device)
        return box[0]

    def all_gather_object(self, obj) -> list:
        """Every rank's picklable ``obj``, in rank order, on every rank."""
        if not self.enabled:
            return [obj]
        out = [None] * self.world_size
        torch.distributed.all_gather_object(out, obj)
        return out


class _Method(torch.nn.Module):
    """A module whose forward is ``module.<method>``: DDP hooks only ``forward``."""

    def __init__(self, module: torch.nn.Module, method: str):
        super().__init__()
        self.module, self.method = module, method

    def forward(self, *args, **kwargs):
        return getattr(self.module, self.method)(*args, **kwargs)


def rank_threads() -> int:
    """CPU threads for one rank: the cores this process may use, shared by the ranks of its node
    (``LOCAL_WORLD_SIZE``, set by torchrun), at least 1."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    try:
        local = max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
    except ValueError:
        local = 1
    return max(1, cores // local)


def setup(device: str | None = "auto") -> Dist:
    """Join the torchrun job (once per process) and choose this rank's device.

    ``device`` is the command's ``--device``: ``auto`` or ``cuda`` become ``cuda:LOCAL_RANK`` under
    torchrun (``auto`` falls back to the CPU without CUDA); an explicit ``cuda:N`` is refused there,
    since every rank would use the same GPU.
    """
    world = env_world_size()
    if world == 1:
        return Dist(device=resolve_device(device))
    rank, local_rank = int(os.environ.get("RANK", "0")), int(os.environ.get("LOCAL_RANK", "0"))
    name = device or "auto"
    if name.startswith("cuda:"):
        raise PhraseRescoreError(f"--device {name}: under torchrun each rank uses cuda:LOCAL_RANK; "
                                 "pass --device cuda (or auto)")
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    dev = resolve_device(name)
    if dev.type == "cuda":
        if local_rank >= torch.cuda.device_count():
            raise PhraseRescoreError(f"LOCAL_RANK {local_rank} but this node has {torch.cuda.device_count()} "
                                     "CUDA device(s): start at most one process per GPU")
        dev = torch.device("cuda", local_rank)
        torch.cuda.set_device(dev)
    if not torch.distributed.is_initialized():
        backend = "nccl" if dev.type == "cuda" else "gloo"
        torch.distributed.init_process_group(backend=backend, timeout=TIMEOUT,
                                             **({"device_id": dev} if dev.type == "cuda" else {}))
        atexit.register(_shutdown)
    if torch.distributed.get_world_size() != world:
        raise PhraseRescoreError(f"the process group has {torch.distributed.get_world_size()} ranks, "
                                 f"WORLD_SIZE says {world}")
    return Dist(rank=rank, world_size=world, local_rank=local_rank, device=dev)


def _shutdown() -> None:
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()
