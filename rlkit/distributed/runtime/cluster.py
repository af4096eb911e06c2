"""Starting Ray, keeping its token private, and sizing every actor's request to the cluster."""

from __future__ import annotations

import math
import os
import warnings
from dataclasses import dataclass
from pathlib import Path

from rlkit.core.validation import COUNT, check_value, number_rule

#: The environment variable holding Ray's ``max_direct_call_object_size``: an argument or a
#: reply smaller than this travels inside the call message itself instead of through the
#: shared-memory object store. Every Ray process reads it at start, so workers inherit it from
#: the process that started the cluster.
INLINE_LIMIT_ENV = "RAY_max_direct_call_object_size"
#: Ray's own default limit.
RAY_DEFAULT_INLINE_LIMIT = 100 * 1024
#: The limit for the clusters :func:`init_ray` starts: a 256x256 network's weights (270 KB)
#: then skip the object store; measured here, a weights version costs training 1.3 ms instead
#: of 2.1 ms (``benchmarks/weight_sync.py``). Bigger objects still go through the store.
LOCAL_INLINE_LIMIT = 1024 * 1024


def inline_limit() -> int:
    """The inline limit in bytes that Ray uses in this process (see :data:`INLINE_LIMIT_ENV`)."""
    value = os.environ.get(INLINE_LIMIT_ENV, "")
    return int(value) if value.isdigit() else RAY_DEFAULT_INLINE_LIMIT


def init_ray(num_cpus: int | None = None) -> dict[str, float]:
    """Attach to the cluster at ``RAY_ADDRESS`` if set, else start a local one; no dashboard.

    A local instance keeps Ray 2.60's token authentication on (``ray.init`` turns it on unless
    ``RAY_AUTH_MODE`` says otherwise): its ports listen on the machine's network address, not
    only on localhost, so the token is what keeps other machines out. The token file
    (``~/.ray/auth_token``) is made readable by its owner only. Setting
    ``RAY_AUTH_MODE=disabled`` gets a warning.

    A local instance also sends objects up to :data:`LOCAL_INLINE_LIMIT` (1 MiB) inside call
    messages, unless ``RAY_max_direct_call_object_size`` is already set: it sets that variable
    in this process before starting Ray, so every Ray process of the instance inherits it.

    Args:
        num_cpus: CPUs a *local* instance offers (default: all logical cores).

    Returns:
        The cluster's resources, e.g. ``{"CPU": 2.0, ...}``.
    """
    import ray

    if not ray.is_initialized():
        if os.environ.get("RAY_ADDRESS"):
            ray.init(address=os.environ["RAY_ADDRESS"])
        else:
            mode = os.environ.get("RAY_AUTH_MODE", "")
            if mode and mode.lower() != "token":
                warnings.warn(f"RAY_AUTH_MODE={mode!r} turns Ray's token authentication off: "
                              "anyone who can reach this machine's Ray ports can run code "
                              "here. Fix: unset RAY_AUTH_MODE.", stacklevel=2)
            os.environ.setdefault(INLINE_LIMIT_ENV, str(LOCAL_INLINE_LIMIT))
            ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=True)
            protect_token_file()
    return ray.cluster_resources()


def require_ray() -> dict[str, float]:
    """The running cluster's resources; a clear error if Ray was not started."""
    import ray

    if not ray.is_initialized():
        raise RuntimeError("Ray is not initialised. Fix: call "
                           "rlkit.distributed.runtime.cluster.init_ray() first.")
    return ray.cluster_resources()


def protect_token_file() -> Path | None:
    """Make Ray's token file readable by its owner only (Ray 2.60 writes it world-readable);
    returns its path, or ``None`` if there is none or it is not ours."""
    token = Path(os.environ.get("RAY_AUTH_TOKEN_PATH", Path.home() / ".ray" / "auth_token"))
    try:
        if token.is_file() and token.stat().st_uid == os.getuid():
            token.chmod(0o600)
            return token
    except OSError:
        pass
    return None


#: The smallest CPU share a rollout worker may get; below it a worker would barely run.
MIN_WORKER_CPUS = 0.05


@dataclass(frozen=True)
class ResourcePlan:
    """What each actor asks Ray for. CPU fractions are scheduling labels: a 0.5-CPU actor still
    runs in its own process, and Ray starts it only while the requests add up to at most the
    cluster's CPUs, so the plan never leaves an actor pending forever. The parameter server and
    the evaluator ask for no CPU: they are idle most of the time."""

    learner_cpus: float
    worker_cpus: float
    learner_gpus: float = 0.0
    evaluator_cpus: float = 0.0
    parameter_server_cpus: float = 0.0


def plan_resources(num_workers: int, cluster_cpus: float, learner_gpus: float | None = 0.0,
                   cluster_gpus: float = 0.0, shards: int = 0) -> ResourcePlan:
    """One CPU for the learner, the rest shared by the rollout workers (at most 1 each).

    On 2 CPUs: learner 1, two workers 0.5 each; on 16 CPUs: learner 1 and up to 15 workers with
    a whole core each.

    Args:
        num_workers: Rollout workers.
        cluster_cpus: The cluster's CPUs (``ray.cluster_resources()["CPU"]``).
        learner_gpus: GPUs for the learner; ``None``: 1 if the cluster has one, else 0.
        cluster_gpus: The cluster's GPUs.
        shards: Other actors sharing the workers' CPUs, each sized as a worker (Ape-X's
            replay shards).

    Raises:
        ValueError: if ``num_workers`` is not a positive int, the cluster is too small for
            them, or the learner asks for a GPU the cluster does not have. The message names
            the fix.
    """
    check_value("num_workers", num_workers, COUNT)
    check_value("learner_gpus", learner_gpus, number_rule(at_least=0, optional=True, example=1))
    if learner_gpus is None:
        learner_gpus = 1.0 if cluster_gpus >= 1 else 0.0
    if learner_gpus > cluster_gpus:
        raise ValueError(f"learner_gpus={learner_gpus:g} but the cluster has {cluster_gpus:g} "
                         f"GPUs. Fix: use learner_gpus=0 (CPU) or None.")
    learner = 1.0 if cluster_cpus >= 2 else cluster_cpus / 2
    per_worker = min(1.0, (cluster_cpus - learner) / (num_workers + shards))
    if per_worker < MIN_WORKER_CPUS:
        besides = f" beside {shards} shards" if shards else ""
        raise ValueError(
            f"num_workers={num_workers}{besides} is too many for a cluster of "
            f"{cluster_cpus:g} CPUs (each would get {per_worker:.3f} CPU). Fix: use at most "
            f"{int((cluster_cpus - learner) / MIN_WORKER_CPUS) - shards} workers{besides} or a "
            f"bigger cluster.")
    # Ray counts CPUs in steps of 1e-4: round *down*, so the requests never add up to more
    # than the cluster has (rounding 1/6 up to 0.1667 would overbook 2 CPUs by 0.0002)
    return ResourcePlan(learner_cpus=learner, worker_cpus=math.floor(per_worker * 1e4) / 1e4,
                        learner_gpus=float(learner_gpus))
