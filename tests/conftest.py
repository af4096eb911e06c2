"""Shared fixtures: a real local Ray cluster (2 CPUs, no dashboard) and process checks."""

import time

import psutil
import pytest

from rlkit.algos.impala import IMPALAConfig

#: IMPALA for the cluster tests that must solve: 3M env steps, not 1M, because an asynchronous
#: run now and then wanders before it solves (notebook 07 uses the same budget).
CLUSTER_IMPALA = IMPALAConfig(envs_per_worker=8, eval_episodes=10, total_steps=3_000_000)

ACTOR_CLASSES = ("RolloutWorker", "LearnerWorker", "Evaluator", "ParameterServer",
                 "GradientWorker", "GradientServer", "ImpalaActor", "ImpalaLearner",
                 "TrajectoryQueue", "ReplayShard", "ApexWorker", "ApexLearner")


def _processes(names: tuple[str, ...]) -> list[tuple[int, str]]:
    """``(pid, command line)`` of this machine's processes whose command line or name holds
    one of ``names``."""
    found = []
    for proc in psutil.process_iter(["name", "cmdline"]):
        try:
            text = " ".join(proc.info["cmdline"] or []) + " " + (proc.info["name"] or "")
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        if any(n in text for n in names):
            found.append((proc.pid, text))
    return found


def our_ray_processes() -> list[str]:
    """Command lines of Ray's processes on this machine (raylet, GCS, ``ray::`` workers)."""
    return [text[:80] for _, text in _processes(("raylet", "gcs_server", "ray::"))]


def actor_processes(*class_names: str) -> list[str]:
    """Live processes of our actor classes (Ray names an actor's process ray::ClassName)."""
    return [t for t in our_ray_processes() if any(c in t for c in class_names)]


def wait_until_no_actors(seconds: float = 10.0) -> list[str]:
    """Poll until no process of our actor classes is left (a killed process takes a moment
    to exit); return what is left after ``seconds``."""
    deadline = time.monotonic() + seconds
    while (left := actor_processes(*ACTOR_CLASSES)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


@pytest.fixture(scope="module")
def ray_cluster():
    """A local cluster of 2 CPUs and *no GPU*, also on a machine that has one: the tests that
    use it check the CPU path and the errors for a GPU the cluster lacks. (GPU tests start
    their own cluster with the GPU.)"""
    ray = pytest.importorskip("ray")
    assert not ray.is_initialized()
    ray.init(num_cpus=2, num_gpus=0, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


@pytest.fixture
def kill_times(monkeypatch):
    """When each scheduled kill really happened (``time.perf_counter()``), by role."""
    times = {}
    from rlkit.distributed.runtime.supervisor import Supervisor

    original = Supervisor.inject_faults

    def recording(self, env_steps):
        due = [role for role, at in self.kill_at.items() if env_steps >= at]
        original(self, env_steps)
        times.update({role: time.perf_counter() for role in due})

    monkeypatch.setattr(Supervisor, "inject_faults", recording)
    return times


class NodesCluster:
    """A Ray cluster of several raylets on this machine (``ray.cluster_utils.Cluster``): a head
    with no CPU (the driver and the roles pinned to it) and ``workers`` nodes of 1 CPU each.
    ``remove_node_of(monkeypatch, role, at)`` removes, mid-run, the node that ``role``'s actor
    runs on once the run has counted ``at`` env steps; ``refill()`` adds nodes back."""

    def __init__(self, workers: int = 3) -> None:
        import ray
        from ray.cluster_utils import Cluster

        self.workers = workers
        self.cluster = Cluster(initialize_head=True, head_node_args={
            "num_cpus": 0, "include_dashboard": False})
        self.refill()
        ray.init(address=self.cluster.address, log_to_driver=False)
        self.losses: dict = {}  # role -> rlkit.distributed.runtime.faults.NodeLoss

    def refill(self) -> None:
        while len(self.cluster.worker_nodes) < self.workers:
            self.cluster.add_node(num_cpus=1)
        self.cluster.wait_for_nodes()

    def remove_node_of(self, monkeypatch, role: str, at: int, replace: bool = False,
                       silent: bool = False) -> None:
        """Until the test ends; ``replace``: a new 1-CPU node joins right after; ``silent``:
        the node's processes are SIGKILLed (Ray finds out only from its health checks)."""
        from rlkit.distributed.runtime import supervisor
        from rlkit.distributed.runtime.faults import node_loss_hook

        hook, self.losses[role] = node_loss_hook(self.cluster, role, at, replace, silent)
        monkeypatch.setattr(supervisor, "FAULT_HOOKS", [*supervisor.FAULT_HOOKS, hook])

    @property
    def removed(self) -> dict[str, tuple[str, float]]:
        """``{role: (node id, when)}`` of the nodes removed since the last ``clear()``."""
        return {r: (x.node_id, x.at_seconds) for r, x in self.losses.items() if x.node_id}

    def clear(self) -> None:
        self.losses = {}

    def shutdown(self) -> None:
        import ray

        ray.shutdown()
        self.cluster.shutdown()


def ray_node_processes() -> list[int]:
    """Pids of the raylets and GCS servers on this machine."""
    return [pid for pid, _ in _processes(("raylet", "gcs_server"))]


@pytest.fixture(scope="module")
def nodes_cluster():
    """A head (0 CPU) and three 1-CPU nodes; afterwards no raylet or GCS of it is left."""
    ray = pytest.importorskip("ray")
    assert not ray.is_initialized()
    before = set(ray_node_processes())
    nodes = NodesCluster()
    yield nodes
    nodes.shutdown()
    deadline = time.monotonic() + 10
    while (left := set(ray_node_processes()) - before) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not left, f"raylets or GCS left running: {sorted(left)}"
