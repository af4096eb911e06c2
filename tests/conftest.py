"""Shared fixtures: a real local Ray cluster (2 CPUs, no dashboard) and process checks."""

import os
import time

import psutil
import pytest
import torch

from rlkit.algos.impala import IMPALAConfig

#: IMPALA for the cluster tests that must solve. A budget of 3M env steps, not 1M, as a margin:
#: these runs lose a node or restart their learners on the way, and while every seed of notebook
#: 06's benchmark solved within 1M (the slowest at 443k, one process), an asynchronous run's
#: tail is not measured. The first evaluation comes at 50k env steps, not 20k: the tests lose a
#: node or press Ctrl-C at 30k-40k, and a run must not solve before that.
CLUSTER_IMPALA = IMPALAConfig(envs_per_worker=8, eval_episodes=10, eval_every=50_000,
                              total_steps=3_000_000)

ACTOR_CLASSES = ("RolloutWorker", "OffPolicyLearner", "Evaluator", "ParameterServer",
                 "GradientWorker", "GradientServer", "IMPALAWorker", "IMPALALearner",
                 "FragmentQueue", "ReplayShard", "ApexWorker", "ApexLearner")


def cuda(test):
    """Mark a test ``gpu`` (``pytest -m gpu`` runs every CUDA test) and skip it without CUDA."""
    return pytest.mark.gpu(pytest.mark.skipif(not torch.cuda.is_available(),
                                              reason="needs CUDA")(test))


#: A notebook cell that uses Ray's core as notebook 00 does: a remote function and an actor class
#: defined in the notebook, ``ray.wait``, ``ray.kill`` (run by the browser and twice-in-one-kernel
#: tests; it needs ``ray`` imported and initialised).
RAY_CORE_CELL = """@ray.remote
def square(x):
    return x * x

@ray.remote
class Counter:
    def __init__(self):
        self.n = 0

    def add(self, k):
        self.n += k
        return self.n

counter = Counter.remote()
ready, _ = ray.wait([square.remote(i) for i in range(8)], num_returns=8, timeout=60)
assert sorted(ray.get(ready)) == [i * i for i in range(8)]
assert ray.get([counter.add.remote(k) for k in (1, 2, 3)])[-1] == 6  # a fresh actor each run
ray.kill(counter)"""


def assert_same_tree(a, b, path="checkpoint"):
    """Two checkpoint trees hold the same values, tensors bit for bit (dtype included)."""
    import torch

    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b), path
    elif isinstance(a, dict):
        assert isinstance(b, dict) and sorted(a, key=repr) == sorted(b, key=repr), path
        for key in a:
            assert_same_tree(a[key], b[key], f"{path}[{key!r}]")
    elif isinstance(a, list | tuple):
        assert isinstance(b, list | tuple) and len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same_tree(x, y, f"{path}[{i}]")
    else:
        assert a == b, (path, a, b)


def _ours(proc: psutil.Process) -> bool:
    """Whether this test session started ``proc`` (it descends from this process: Ray's
    raylets and GCS are children of the driver, its workers children of a raylet, notebook
    kernels children of the test), or ``proc`` outlived what started it (re-parented to init):
    what the suite must not leave behind. A process under another live parent belongs to
    another run on this machine (a second suite, a learner's notebook) and is not ours to
    count."""
    try:
        return proc.ppid() in (0, 1) or any(p.pid == os.getpid() for p in proc.parents())
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


def _processes(names: tuple[str, ...]) -> list[tuple[int, str]]:
    """``(pid, command line)`` of our processes (:func:`_ours`) whose command line or name
    holds one of ``names``."""
    found = []
    for proc in psutil.process_iter(["name", "cmdline"]):
        try:
            text = " ".join(proc.info["cmdline"] or []) + " " + (proc.info["name"] or "")
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        if any(n in text for n in names) and _ours(proc):
            found.append((proc.pid, text))
    return found


def our_ray_processes() -> list[str]:
    """Command lines of our Ray processes (raylet, GCS, ``ray::`` workers; see :func:`_ours`)."""
    return [text[:80] for _, text in _processes(("raylet", "gcs_server", "ray::"))]


def actor_processes(*class_names: str) -> list[str]:
    """Live processes of our actor classes (Ray names an actor's process ray::ClassName)."""
    return [t for t in our_ray_processes() if any(c in t for c in class_names)]


def check_timeline(result, roles: set[str]) -> None:
    """A Ray run's result carries its timeline (``rlkit.core.timeline``): the driver's lane and
    a lane for each of ``roles``; spans in start order, in the run's clock, none ending before
    it starts."""
    spans = result.timeline
    assert {"driver", *roles} <= {s.role for s in spans}, {s.role for s in spans}
    assert [s.start for s in spans] == sorted(s.start for s in spans)
    assert all(0 <= s.start <= s.end for s in spans if s.end is not None)


def stop_pressed_twice(monkeypatch, gap_ms: float, run, save_seconds: float = 0.4) -> None:
    """Run ``run()`` with stop pressed twice, ``gap_ms`` apart, as a terminal or JupyterLab
    sends it: the first press at the run's first logged episode, the second from another
    thread, while the checkpoint is saved (``torch.save`` made to take ``save_seconds``, as a
    large buffer on a slow disk does, so that every gap lands in it). The caller reads what was
    printed (``capsys``). A press that comes after the run stopped is ignored, not raised: a
    KeyboardInterrupt escaping into pytest would stop the whole session."""
    import signal
    import threading

    import rlkit.train.checkpoint as checkpoint_module
    from rlkit.core.metrics import History

    real_save = checkpoint_module.torch.save

    def slow_save(*args, **kwargs):
        time.sleep(save_seconds)
        return real_save(*args, **kwargs)

    def first_press(self, *args):
        threading.Timer(gap_ms / 1000, os.kill, (os.getpid(), signal.SIGINT)).start()
        raise KeyboardInterrupt

    running = [True]

    def ctrl_c(signum, frame):  # Python's own Ctrl-C while the run runs; later, ignored
        if running[0]:
            raise KeyboardInterrupt

    monkeypatch.setattr(History, "log_episode", first_press)
    monkeypatch.setattr(checkpoint_module.torch, "save", slow_save)
    inherited = signal.signal(signal.SIGINT, ctrl_c)
    try:
        with pytest.raises(KeyboardInterrupt):
            try:
                run()
            finally:
                running[0] = False  # (a press just before this line raises inside pytest.raises)
        time.sleep(gap_ms / 1000 + 1.0)  # where a press after the stop lands
    finally:
        signal.signal(signal.SIGINT, inherited)
    monkeypatch.undo()


def wait_until_no_actors(seconds: float = 30.0) -> list[str]:
    """Poll until no process of our actor classes is left (a killed process takes a moment
    to exit); return what is left after ``seconds``.

    On an idle 2-core VM the processes of a finished run are gone within a second or two (the
    driver itself waits up to ``EXIT_TIMEOUT_S`` = 10 s for Ray to report them dead). A run that
    fails while its roles are still starting can leave one being built (importing torch: 3-6 s
    idle) when it is killed; on a loaded machine (a busy process per core, plus a second Ray
    session) one such ``OffPolicyLearner`` was still there 10 s after the driver's own wait. The
    poll returns as soon as nothing is left, so 30 s costs nothing when all is well and keeps
    the check ("nothing we start is left running") true on a machine 3x slower."""
    deadline = time.monotonic() + seconds
    while (left := actor_processes(*ACTOR_CLASSES)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


#: Fixtures that start Ray: a test that uses one is a Ray test whatever its marks say, so the fast
#: tier (``make check``: ``-m "smoke or not (ray or slow)"``) leaves it out.
RAY_FIXTURES = {"ray_cluster", "nodes_cluster"}


def pytest_collection_modifyitems(config, items):
    """Mark the tests that use a Ray fixture ``ray``; and run every test that uses the shared
    ``ray_cluster`` in one block, in their order, where the first of them was: the cluster then
    starts once for all of them (each start costs seconds on 2 cores), and every other test
    meets the machine as before, with no Ray running."""
    for item in items:
        if RAY_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.ray)
    shared = [i for i in items if "ray_cluster" in getattr(i, "fixturenames", ())]
    if shared:
        first = items.index(shared[0])
        rest = [i for i in items if "ray_cluster" not in getattr(i, "fixturenames", ())]
        items[:] = rest[:first] + shared + rest[first:]


#: The GCS address of the local cluster that ``ray_cluster`` started and keeps through its block
#: of tests ("" when none is up): one start for all of them, not one per module.
_SHARED = {"address": ""}


def _shared_cluster_up() -> bool:
    import ray

    return bool(_SHARED["address"]) and ray.is_initialized()


def release_shared_cluster() -> None:
    """Shut the shared cluster down, if it is up."""
    import ray

    if _shared_cluster_up():
        ray.shutdown()
    _SHARED["address"] = ""


@pytest.fixture(scope="module")
def ray_cluster():
    """A local cluster of 2 CPUs and *no GPU*, also on a machine that has one: the tests that
    use it check the CPU path and the errors for a GPU the cluster lacks. (GPU tests start
    their own cluster with the GPU.) Started once for the block of tests that use it (see
    ``pytest_collection_modifyitems``), shut down after it (``pytest_runtest_setup``) and at the
    end of the session. Every test that uses it leaves no actor behind, so a module finds it as
    a fresh one would be."""
    ray = pytest.importorskip("ray")
    if not _shared_cluster_up():
        assert not ray.is_initialized(), "a test left its own Ray instance running"
        # address="local": a new instance even when another run or a `ray start` on this
        # machine left one that plain ray.init() would join (and then refuse num_cpus)
        ray.init(address="local", num_cpus=2, num_gpus=0, include_dashboard=False,
                 log_to_driver=False)
        _SHARED["address"] = ray.get_runtime_context().gcs_address
    yield ray


def pytest_runtest_setup(item):
    """After the block of tests that use ``ray_cluster``, the shared cluster goes: the next
    test finds no Ray running, as it would have before the cluster was shared."""
    if "ray_cluster" not in getattr(item, "fixturenames", ()):
        release_shared_cluster()


def pytest_sessionfinish(session, exitstatus):
    release_shared_cluster()


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


#: The time from a failure to the error that names the role, beyond the supervisor's own ping
#: wait (``PING_TIMEOUT_S``): Ray reporting the failed call, and the GCS lookups that find the
#: node. On the 2-core VM, with a busy process per core beside it, the whole naming (ping
#: included) took 0.0-1.4 s; 1 s for the rest, times 3 for a machine 3x slower.
NAMING_ALLOWANCE_S = 3 * 1.0


@pytest.fixture
def named_times(monkeypatch):
    """When the supervisor built the error naming each role (``time.perf_counter()``), by the
    role named: the moment the failure is known, before the run's teardown (which may take up
    to ``EXIT_TIMEOUT_S`` more) lets the error out."""
    from rlkit.distributed.runtime import supervisor

    times: dict[str, float] = {}
    original = supervisor.Supervisor.failure

    def timed_failure(self, *args, **kwargs):
        error = original(self, *args, **kwargs)
        times.setdefault(error.role, time.perf_counter())
        return error

    monkeypatch.setattr(supervisor.Supervisor, "failure", timed_failure)
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
        """``{role: (node id, when)}`` of the nodes removed since the last ``clear()``; when:
        the moment the driver could first notice (after a replacement node joined, which the
        simulation does in the driver's thread)."""
        return {r: (x.node_id, x.driver_back_at) for r, x in self.losses.items() if x.node_id}

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
