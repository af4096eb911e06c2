"""The actor-learner queue driver: IMPALA, PPO and APPO under Ray.

The driver (:class:`IMPALARun`, on the shared loop of :class:`DriverRun`) starts a
:class:`FragmentQueue`, an :class:`IMPALALearner` and ``num_workers`` workers
(:class:`IMPALAWorker`). The workers run on their own (``run()`` returns only when the queue
closes); the driver keeps two learner calls in flight, logs what they report, evaluates the
greedy policy every ``eval_every`` env steps, restarts a worker that dies, and closes the queue
when the run is solved or out of budget. Asynchronous runs are not bit-reproducible.
"""

from __future__ import annotations

import collections
import time
import warnings
from dataclasses import dataclass
from typing import Any

from rlkit.algos.actor_critic import greedy_eval
from rlkit.algos.impala import WARN_QUEUE_UPDATES, IMPALAConfig
from rlkit.algos.policy_heads import make_actor_critic
from rlkit.algos.ppo import PPOConfig
from rlkit.core.common import evaluation_due
from rlkit.core.spaces import obs_spec
from rlkit.core.types import Weights
from rlkit.core.validation import build, fail, number, require_instance
from rlkit.distributed.impala.roles import (IMPALAWorker, IMPALALearner, IMPALALearnerReport,
                                            FragmentQueue)
from rlkit.distributed.runtime.driver import DriverRun
from rlkit.distributed.runtime.failures import RoleFailedError
from rlkit.distributed.runtime.learner_group import check_group_share
from rlkit.distributed.runtime.options import RunOptions
from rlkit.distributed.runtime.supervisor import STARTUP_TIMEOUT_S
from rlkit.envs.make import make_env, space_dims
from rlkit.train.checkpoint import Checkpoint
from rlkit.train.impala import IMPALAResult

UPDATES_PER_CALL = 4  # learner updates per remote call
LEARNER_CALLS = 2  # learner calls kept in flight (the next waits while one runs)


@dataclass(frozen=True)
class IMPALAOptions(RunOptions):
    """How an IMPALA, PPO or APPO run runs: every driver's options
    (:class:`~rlkit.distributed.runtime.options.RunOptions`) plus where its learner trains.

    Attributes:
        learner_gpus: GPUs each learner rank asks for: 0 trains on the CPU (an MLP on a vector
            task gains nothing from a GPU); 1 puts the network and each batch on a GPU, the
            choice for a conv net on frames (``python -m benchmarks.learner`` measures both).
    """

    learner_gpus: float = number(0.0, at_least=0, example=1, meaning="GPUs")


def train_impala_ray(config: IMPALAConfig, **options: Any) -> IMPALAResult:
    """Train IMPALA with ``config.num_workers`` workers, a bounded queue and a learner actor.

    Stops at the first greedy evaluation reaching ``config.target_return`` or once the learner
    has consumed ``config.total_steps`` env steps: an update takes a whole batch, so a run may
    pass the budget by less than one update's env steps (``batch_fragments * unroll_length *
    envs_per_worker``). Call :func:`init_ray` first.

    Args:
        config: The run's settings.
        options: :class:`IMPALAOptions` fields (every driver's ``progress``, ``timeout_s``,
            ``max_restarts``, ``kill_at``, ``checkpoint_dir``, ``checkpoint_every`` (default 50
            updates), ``resume_from``, ..., and ``learner_gpus``); the roles are
            ``"worker i"``, ``"learner"`` and ``"fragment queue"``. A checkpoint holds the
            learner (network, Adam, version), not the queue's fragments.
    """
    require_instance("train_impala_ray", "config", config, IMPALAConfig,
                     "train_impala_ray(IMPALAConfig(...))")
    if isinstance(config, PPOConfig):
        raise TypeError(f"train_impala_ray was given a PPOConfig ({config.algorithm}), "
                        f"whose learner and checks belong to the PPO family. Fix: call "
                        f"train_{config.algorithm.lower()}_ray(config).")
    return IMPALARun(config, build(IMPALAOptions, "train_impala_ray", options)).run()


def train_ppo_ray(config: PPOConfig, **options: Any) -> IMPALAResult:
    """PPO on Ray, synchronous: each of ``config.num_workers`` workers collects
    ``batch_fragments / num_workers`` fragments with the same weights and waits; the learner
    runs its epochs over the batch and publishes; the next round starts. IMPALA's roles and
    driver with PPO's learner (policy lag 0). Arguments as :func:`train_impala_ray`."""
    return _train_ppo_family("train_ppo_ray", config, True, options)


def train_appo_ray(config: PPOConfig, **options: Any) -> IMPALAResult:
    """APPO: PPO's learner behind IMPALA's asynchronous workers and queue. Workers never wait
    for the learner, so fragments arrive a few versions old (``policy_lags``); the surrogate's
    ratio is taken against the policy that acted, and ``use_vtrace`` corrects the targets.
    ``config.synchronous`` must be False. Arguments as :func:`train_impala_ray`."""
    return _train_ppo_family("train_appo_ray", config, False, options)


def _train_ppo_family(owner: str, config: PPOConfig, synchronous: bool,
                      options: dict[str, Any]) -> IMPALAResult:
    require_instance(owner, "config", config, PPOConfig, f"{owner}(PPOConfig(...))")
    if config.synchronous != synchronous:
        other = "train_appo_ray" if synchronous else "train_ppo_ray"
        fail("synchronous", config.synchronous, f"trains {config.algorithm}, but "
             f"{owner} runs {'PPO' if synchronous else 'APPO'}", f"pass "
             f"dataclasses.replace(config, synchronous={synchronous}), or call {other}")
    return IMPALARun(config, build(IMPALAOptions, owner, options)).run()


class IMPALARun(DriverRun):
    """One IMPALA run on the shared :class:`DriverRun` loop. Its events: a learner report (record
    it, ask again, evaluate when due), a worker's ``run()`` ended (a failure: restart it)."""

    CHECKPOINT_EVERY = 50  # updates of B fragments (about 205k env steps with the defaults)
    LEARNER_GROUPS = LEARNER_RESTARTS = True

    def __init__(self, config: IMPALAConfig, options: IMPALAOptions) -> None:
        name = config.algorithm
        super().__init__(options, config.total_steps, f"{name} (Ray)", name, config)
        self.config = config
        check_group_share(options.num_learners, "batch_fragments", config.batch_fragments)
        columns = config.batch_fragments * config.envs_per_worker  # per update
        if name == "IMPALA" and (share := columns // options.num_learners) < config.minibatches:
            fail("num_learners", options.num_learners, f"leaves each rank {share} env columns per "
                 f"update, fewer than the {config.minibatches} SGD steps every rank takes",
                 f"use fewer learners, or minibatch_envs >= {-(-columns // share)}")
        # refused here if it cannot be placed; Ray hides a GPU only from an actor asking for one
        plan = self.place(config.num_workers, options.learner_gpus)
        self.device = "cuda" if plan.learner_gpus > 0 else "cpu"
        self.kind = config.action_kind
        probe = make_env(config.env_id, config.seed, self.kind, name, config.images)
        self.obs_dim = obs_spec(probe.observation_space)  # a vector's size or a frame's form
        self.n_actions = space_dims(probe)[1]
        probe.close()
        # the driver's evaluation network, built before any actor starts: a network this
        # config cannot have (shared_encoder on a vector) is refused here, not in a role
        self.eval_net = make_actor_critic(self.obs_dim, self.n_actions, config.hidden, self.kind,
                                          config.shared_encoder)
        self.lags: list[int] = []
        self.diagnostics: dict[str, list[float]] = {}
        self.weights: Weights = {}
        self.busy = self.learner_wait = self.eval_seconds = 0.0
        self.steps_base = self.env_steps  # the ranks count the steps they consume from here
        # the budget is kept by asking no more updates than it still holds: each learner call
        # asks for its share, and the calls in flight are counted (answered in the order asked)
        self.update_steps = config.batch_fragments * config.steps_per_fragment
        self.asked: collections.deque[int] = collections.deque()
        # the roles' own waits (a full queue, an empty one) give up first, with their message
        self.role_timeout = options.timeout_s / 2

    def role_names(self) -> list[str]:
        return ["fragment queue", *self.learner_roles] + [
            f"worker {i}" for i in range(self.config.num_workers)]

    def start_roles(self) -> None:
        """The queue, the learner and the workers, as planned in ``__init__``."""
        import ray

        sup, config, timeout = self.supervisor, self.config, self.role_timeout
        queue = sup.start("fragment queue", lambda r: ray.remote(FragmentQueue).options(
            **sup.options("fragment queue", max_concurrency=2 * config.num_workers + 4)
        ).remote(config.queue_size))
        world = len(self.learner_roles)
        for rank, role in enumerate(self.learner_roles):
            sup.start(role, lambda r, role=role, rank=rank: ray.remote(IMPALALearner).options(
                **sup.options(role)).remote(config, self.obs_dim, self.n_actions, queue,
                                            timeout, rank, world, self.device))
        for i in range(config.num_workers):
            sup.start(f"worker {i}", lambda r, i=i: ray.remote(IMPALAWorker).options(
                **sup.options(f"worker {i}")).remote(config, i, queue, r, timeout))
        timeout = max(STARTUP_TIMEOUT_S, self.options.timeout_s)
        sup.wait_started(list(sup.handles), timeout)
        self.form_learner_group(timeout)
        self.restore_learner(timeout)  # before any worker asks for its first weights
        self.device = sup.get(sup[self.LEARNER].device_name.remote(), self.LEARNER, "starting",
                              timeout)

    def train(self) -> None:
        for i in range(self.config.num_workers):
            self.launch_worker(i)
        for _ in range(LEARNER_CALLS):
            self.ask_learner()
        super().train()

    def schedule(self) -> None:
        """Nothing waits for a schedule: each event relaunches its own call."""

    def done(self) -> bool:
        return self.solved or self.env_steps >= self.config.total_steps

    def launch_worker(self, i: int) -> None:
        if f"worker {i}" not in self.supervisor.handles:  # dropped: its node is gone
            return
        ref = self.supervisor[f"worker {i}"].run.remote()
        self.expect(ref, f"worker {i}", lambda r, i=i: self.on_worker_stopped(r, i))

    def ask_learner(self) -> None:
        """One ``train`` call to every rank (a group's ranks update in step), for at most
        ``UPDATES_PER_CALL`` updates and no more than the budget still holds once the calls in
        flight are counted: a run stops within one update's env steps past ``total_steps``."""
        left = self.config.total_steps - self.env_steps - sum(self.asked) * self.update_steps
        updates = min(UPDATES_PER_CALL, -(-left // self.update_steps))
        if updates <= 0:
            return
        self.asked.append(updates)
        self.ask_learners("train", [updates], "training", self.on_group_report)

    def on_group_report(self, reports: list[IMPALALearnerReport]) -> None:
        """Every rank's report of one call, merged into the group's (its metrics averaged)."""
        if self.asked:
            self.asked.popleft()  # this call's (calls are answered in the order asked)
        self.on_learner_report(IMPALALearnerReport.merged(reports))

    def learner_restart_under_way(self, under_way: bool) -> None:
        """Tell the queue (see :meth:`FragmentQueue.learner_restart`)."""
        self.supervisor.get(self.supervisor["fragment queue"].learner_restart.remote(
            under_way), "fragment queue", "marking the learner group's restart")

    def after_learner_restart(self, saved: Checkpoint) -> None:
        """The group is back: ask it again (the fragments the dropped calls held are lost)."""
        self.steps_base = self.env_steps  # the new ranks count from here
        self.asked.clear()  # the calls in flight were dropped with the group
        for _ in range(LEARNER_CALLS):
            self.ask_learner()

    def checkpoint_env_steps(self) -> int:
        """The learner's calls in flight finish before it hands over its state (an actor runs
        its calls in order), so the state holds updates whose env steps the driver has not
        counted yet. The ranks' own counts, read just before the state, are the steps behind
        it: a checkpoint's env steps and learner agree (its history ends at the last report)."""
        sup = self.supervisor
        refs = {role: sup[role].consumed_env_steps.remote() for role in self.learner_roles}
        return self.steps_base + sum(sup.get(ref, role, "counting its env steps")
                                     for role, ref in refs.items())

    def on_worker_stopped(self, ref: Any, i: int) -> None:
        """A worker's ``run()`` returned before the queue closed: only a failure does that.
        (It may have failed because a learner rank's node died with it: then the group is
        restarted first.)"""
        try:
            self.supervisor.get(ref, f"worker {i}", "collecting fragments")
        except Exception as error:  # noqa: BLE001  (any failure: replace the worker)
            self.restart_role(f"worker {i}", error)
            if getattr(self.config, "synchronous", False) and (
                    f"worker {i}" not in self.supervisor.handles):
                self.shrink_rounds(i)
        self.launch_worker(i)

    def shrink_rounds(self, i: int) -> None:
        """Synchronous PPO's round waits for every worker's fragments: worker ``i`` is gone for
        good (its node was lost and no node has room), so rounds shrink to the workers left
        (each sends ``batch_fragments / num_workers`` a version). A learner group survives it
        only where the smaller batch still splits evenly over its ranks."""
        sup, workers, batch = self.supervisor, self.config.num_workers, self.config.batch_fragments
        left = sum(f"worker {j}" in sup.handles for j in range(workers))
        if (batch * left) % (workers * len(self.learner_roles)):
            raise RoleFailedError(
                f"worker {i} is lost and no node has room to replace it; synchronous PPO's "
                f"rounds would shrink to {batch * left // workers} fragments, which do not split "
                f"over the {len(self.learner_roles)} learner ranks. Fix: resume from the last "
                f"checkpoint ({sup.last_checkpoint()}) on a cluster with room, or use "
                f"num_learners=1, which shrinks its rounds and goes on.", f"worker {i}")
        sup.get(sup["fragment queue"].shrink_rounds.remote(left, workers, i),
                "fragment queue", "shrinking its rounds")
        self.history.events.append(f"step {self.env_steps}: synchronous rounds shrink to the "
                                   f"{left} of {workers} workers left "
                                   f"({batch * left // workers} of {batch} fragments a batch)")

    def on_learner_report(self, report: IMPALALearnerReport) -> None:
        self.env_steps += report.env_steps
        self.lags += report.lags
        self.updates = report.updates
        self.busy += report.busy_seconds
        self.learner_wait += report.wait_seconds
        now = self.clock()
        for ret in report.episode_returns:
            self.history.log_episode(self.env_steps, now, ret)
        self.history.log_loss(self.env_steps, report.loss)
        for key, values in report.diagnostics.items():
            self.diagnostics.setdefault(key, []).extend(values)
        self.weights = report.weights  # the policy the recorded env steps trained
        self.maybe_save(self.updates)
        self.ask_learner()
        self.maybe_evaluate()

    def maybe_evaluate(self) -> None:
        """A greedy evaluation, in the driver, of the weights the consumed env steps trained,
        when :func:`evaluation_due` says; its seconds add up in ``eval_seconds``."""
        config, evals = self.config, len(self.history.eval_steps)
        if not evaluation_due(self.env_steps, self.history.eval_steps, config.eval_every,
                              config.total_steps):
            return
        begin = time.perf_counter()
        mean, std = greedy_eval(self.weights, self.obs_dim, self.n_actions, config, evals,
                                self.eval_net)
        self.eval_seconds += time.perf_counter() - begin
        self.log_evaluation(self.env_steps, self.clock(), mean, std, config.target_return)

    def finish(self) -> None:
        """Read the queue's statistics and close it: workers return at their next put, the
        learner at its next batch; give them a moment to end cleanly before the supervisor
        kills everything."""
        import ray

        self.wall = self.clock()
        sup = self.supervisor
        # a group's calls in flight end first, while fragments still come (a rank that found the
        # queue closed while another took a batch would wait in its all-reduce); a single one
        # stops at its next batch once the queue closes (not many seconds past the budget)
        if len(self.learner_roles) > 1:
            self.settle(self.learner_roles, self.options.timeout_s)
        self.queue = sup.get(sup["fragment queue"].stats.remote(), "fragment queue",
                             "reading its statistics")
        sup.get(sup["fragment queue"].close.remote(), "fragment queue", "closing")
        ray.wait(list(self.pending), num_returns=len(self.pending), timeout=5.0)
        self.save()

    def result(self) -> IMPALAResult:
        result = IMPALAResult(
            history=self.history, solved=self.solved, eval_return=self.eval_return,
            env_steps=self.env_steps, wall_seconds=self.wall, updates=self.updates,
            weights=self.weights, startup_seconds=self.startup_seconds,
            worker_restarts=self.supervisor.restart_count("worker"), policy_lags=self.lags,
            queue_high_water=self.queue.high_water, actor_wait_seconds=self.queue.wait_seconds,
            learner_busy_seconds=self.busy, learner_wait_seconds=self.learner_wait,
            eval_seconds=self.eval_seconds, diagnostics=self.diagnostics, device=self.device)
        if result.mean_policy_lag > WARN_QUEUE_UPDATES:  # measured, whatever the config promised
            text = (f"the mean policy lag was {result.mean_policy_lag:.1f} updates (max "
                    f"{result.max_policy_lag}): V-trace clipped most importance weights. Fix: "
                    f"fewer workers per learner, or a shorter queue (queue_size="
                    f"{self.config.queue_size})")
            self.history.events.append(f"step {self.env_steps}: {text}")
            warnings.warn(text, stacklevel=3)
        return result
