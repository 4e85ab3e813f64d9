"""The DDP lab: train the grammar tutor on N local gloo processes, twice from one seed -- first
with PyTorch's own all-reduce, then with ringtree's hook -- and compare.

Per rank and run (:func:`train_rank`): the same initial weights (``seed``), the same data
(rank r's windows at step k depend only on ``(seed, k, r)``), SGD with momentum, ``steps``
steps. DDP averages the gradients bucket by bucket through the registered hook, which records
every bucket (:class:`ringtree.integrations.ddp.BucketRecord`). :func:`run_lab` runs both runs in
the same N processes (one start-up, one process group) and returns a :class:`LabResult`:
per-step losses, the bucket records, and the final parameters of every rank, from which it
checks that the ranks agree and how far the two runs drift apart.
"""

from __future__ import annotations

import pickle
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ringtree.lab.grammar import batch, corpus
from ringtree.lab.tutor import TutorConfig
from ringtree.procs.run import RunFailed

RUNS = ("torch", "ringtree")
#: "compute": no communication at all (each bucket is returned as it is), for measuring what
#: the all-reduces add to a step (bench/lab_ddp.py); its ranks drift apart by design
#: "profiled": DDP as it comes (its built-in all-reduce, no Python hook) under torch.profiler,
#: for ``LabConfig.torch_profile``; it leaves the trace files and no result
RUN_TITLES = {"torch": "PyTorch's all-reduce (gloo)", "ringtree": "ringtree's hook",
              "compute": "no communication", "profiled": "DDP profiled by torch.profiler"}


@dataclass(frozen=True)
class LabConfig:
    """What to train, how long, and with which algorithm.

    ranks: gloo processes. steps: optimizer steps per run. algorithm: ringtree's all-reduce
    algorithm (``auto`` or a name). seed: weights and data. trace: keep the engine's
    per-transfer events. corpus_tokens: length of the training stream. bucket_cap_mb: DDP's
    bucket size cap (its default, 25). timeout_s: limit for the whole lab. torch_profile: a
    directory where a last run ("profiled") writes torch.profiler's Kineto traces, one file
    per rank (``rank{r}.json``; None: no such run). It runs DDP with its own all-reduce and no
    Python hook: gloo's span of a collective in the trace ends after the callbacks of the
    collective's future (ProcessGroupGloo ends its record function in ``Work::finish``, after
    ``markCompleted``), so a recording hook's Python would count as communication.
    """

    ranks: int = 2
    steps: int = 50
    algorithm: str = "auto"
    seed: int = 0
    trace: bool = False
    corpus_tokens: int = 50_000
    bucket_cap_mb: float = 25.0
    timeout_s: float = 300.0
    tutor: TutorConfig = field(default_factory=TutorConfig)
    torch_profile: str | None = None


@dataclass
class RankRun:
    """One run on one rank: per-step losses, start and end of every step and of its backward
    pass (``time.perf_counter``; backward ends once DDP has every bucket's result), bucket
    records (as dicts), the final parameters (flattened, float32), and the engine's
    TraceEvents (ringtree's run with ``trace``)."""

    rank: int
    run: str
    losses: list[float]
    step_start_s: list[float]
    step_end_s: list[float]
    buckets: list[dict[str, Any]]
    params: np.ndarray
    events: list[Any] = field(default_factory=list)
    backward_start_s: list[float] = field(default_factory=list)
    backward_end_s: list[float] = field(default_factory=list)


def _flat_params(model: Any) -> np.ndarray:
    import torch

    with torch.no_grad():
        return torch.cat([p.detach().reshape(-1) for p in model.parameters()]).numpy().copy()


def train_run(rank: int, n: int, config: LabConfig, run: str) -> RankRun:
    """Train one run on this rank (inside an initialised process group of ``n`` ranks)."""
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP

    from ringtree.integrations.ddp import comm_hook, recording
    from ringtree.lab.profiled import Profiled
    from ringtree.lab.tutor import build_tutor, optimizer

    cfg = config.tutor
    stream = corpus(config.seed, config.corpus_tokens)
    model = DDP(build_tutor(config.seed, cfg), bucket_cap_mb=config.bucket_cap_mb)
    hook: Any = None
    if run == "torch":
        hook = recording()
    elif run == "compute":
        hook = recording(_no_communication, label="none")
    elif run != "profiled":
        hook = comm_hook(config.algorithm, trace=config.trace)
    if hook is not None:
        model.register_comm_hook(None, hook)
    opt = optimizer(model, cfg)
    losses, starts, ends, b_starts, b_ends = [], [], [], [], []
    profiler = (Profiled(str(config.torch_profile), config.steps, rank) if run == "profiled"
                else None)
    for step in range(config.steps):
        starts.append(time.perf_counter())
        x, y = batch(stream, config.seed, step, rank, cfg.batch_size, cfg.context)
        logits = model(torch.from_numpy(x))
        loss = torch.nn.functional.cross_entropy(
            logits.reshape(-1, cfg.vocab), torch.from_numpy(y).reshape(-1)
        )
        opt.zero_grad(set_to_none=True)
        b_starts.append(time.perf_counter())
        loss.backward()
        b_ends.append(time.perf_counter())
        opt.step()
        losses.append(float(loss.item()))
        ends.append(time.perf_counter())
        if profiler is not None:
            profiler.step()
    if profiler is not None:
        profiler.finish()
    events = list(getattr(hook, "events", []))
    records = hook.records if hook is not None else []
    return RankRun(rank, run, losses, starts, ends, [r.record() for r in records],
                   _flat_params(model.module), events, b_starts, b_ends)


def _no_communication(state: Any, bucket: Any) -> Any:
    """A DDP hook that sends nothing: the bucket's own gradients, at once."""
    import torch

    fut: torch.futures.Future[torch.Tensor] = torch.futures.Future()
    fut.set_result(bucket.buffer())
    return fut


def train_rank(rank: int, n: int, config: LabConfig, runs: tuple[str, ...] = RUNS) -> list[RankRun]:
    """Every run of ``runs`` on this rank, one after another (see :func:`train_run`)."""
    import torch

    torch.set_num_threads(1)  # N processes share the machine's cores
    return [train_run(rank, n, config, run) for run in runs]


@dataclass
class LabResult:
    """Both runs on every rank. ``runs[name][rank]`` is a RankRun."""

    config: LabConfig
    runs: dict[str, list[RankRun]]
    n_params: int
    wall_s: float

    def rank_spread(self, run: str) -> float:
        """Largest |difference| between any rank's final parameters and rank 0's (0.0: the
        ranks agree bit for bit)."""
        ps = [r.params for r in self.runs[run]]
        return max(float(np.max(np.abs(p - ps[0]))) if p.size else 0.0 for p in ps)

    def run_difference(self, a: str = "torch", b: str = "ringtree") -> float:
        """Largest |difference| between rank 0's final parameters in runs ``a`` and ``b``."""
        return float(np.max(np.abs(self.runs[a][0].params - self.runs[b][0].params)))

    def mean_losses(self, run: str) -> list[float]:
        """Per step, the loss averaged over ranks (each rank trains on its own windows)."""
        return [float(np.mean(x)) for x in zip(*(r.losses for r in self.runs[run]), strict=True)]


def lab_rank(engine: Any, cfg: dict[str, Any]) -> dict[str, Any]:
    """One rank of the lab (a body for :mod:`ringtree.procs.rank`): train the pickled job's
    runs, pickle what they return next to the job (too big for the launcher's JSON). A
    failure of torch's own collectives (a peer died) is the engine's error, not a bug."""
    from ringtree.procs.native import EngineError

    with open(cfg["job"], "rb") as f:
        config, runs = pickle.load(f)
    try:
        result = train_rank(engine.rank, engine.size, config, runs)
    except RuntimeError as e:
        first = (str(e).strip().splitlines() or [""])[0]
        raise EngineError(f"{type(e).__name__}: {first}") from None
    with open(Path(cfg["job"]).parent / f"rank{engine.rank}.pkl", "wb") as f:
        pickle.dump(result, f)
    return {}


def run_lab(config: LabConfig, runs: tuple[str, ...] = RUNS) -> LabResult:
    """Train ``runs`` on ``config.ranks`` local gloo processes (each rank runs
    :func:`lab_rank` under the one rank main), then the "profiled" run when
    ``config.torch_profile`` asks for it (its traces are the result); see the module doc.

    RunFailed with one line when a rank fails or the lab runs past ``config.timeout_s``; no
    process is left running either way."""
    from ringtree.lab.tutor import build_tutor, n_parameters
    from ringtree.procs.launch import launch_body

    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ringtree-lab-") as folder:
        job = Path(folder) / "job.pkl"
        todo = (*runs, "profiled") if config.torch_profile else runs
        with open(job, "wb") as f:
            pickle.dump((config, todo), f)
        env = {"OMP_NUM_THREADS": "1"}  # the launcher binds gloo to the loopback interface
        outcome = launch_body(config.ranks, "gloo", "ringtree.lab.ddp:lab_rank",
                              {"job": str(job), "timeout_s": config.timeout_s},
                              timeout_s=config.timeout_s, env=env)
        if not outcome.ok:
            raise RunFailed(outcome.failure_message(config.timeout_s))
        per_rank = []
        for rank in range(config.ranks):
            with open(Path(folder) / f"rank{rank}.pkl", "rb") as f:
                per_rank.append(pickle.load(f))
    out = {run: [rank_runs[i] for rank_runs in per_rank] for i, run in enumerate(runs)}
    n_params = n_parameters(build_tutor(config.seed, config.tutor))
    return LabResult(config, out, n_params, time.perf_counter() - start)
