"""The off-policy replay driver: rollout workers, a learner that owns the buffer, a parameter
server and an evaluator, on the loop every driver shares (:mod:`rlkit.distributed.runtime.driver`).

Read the events: a worker's fragment goes to the learner with exactly the updates the rate
limiter allows and the worker is relaunched (:meth:`OffPolicyRun.on_fragment`); an evaluation
is due every ``eval_every`` env steps (:meth:`OffPolicyRun.schedule`).
"""

from __future__ import annotations

import dataclasses
import math
from collections import deque
from typing import TYPE_CHECKING, Any

import numpy as np

from rlkit.algos.dqn import DQNConfig, DQNSpec
from rlkit.algos.sac import SACConfig, SACSpec
from rlkit.core.common import eval_seed, next_multiple
from rlkit.core.spaces import obs_spec
from rlkit.core.types import OffPolicyAlgorithm, Weights
from rlkit.core.validation import build, require_instance
from rlkit.distributed.off_policy.options import (OffPolicyOptions, OffPolicyResult,
                                                  check_replay_shares)
from rlkit.distributed.off_policy.roles import OffPolicyLearner, RolloutWorker
from rlkit.distributed.runtime.driver import DriverRun
from rlkit.distributed.runtime.evaluator import Evaluator
from rlkit.distributed.runtime.parameter_server import ParameterServer, RayChannel
from rlkit.distributed.runtime.supervisor import (STARTUP_TIMEOUT_S, LearnerFailedError,
                                                  RoleFailedError)
from rlkit.envs.make import make_env, space_dims
from rlkit.replay.buffers import check_buffer_memory
from rlkit.train.checkpoint import Checkpoint, updates_owed
from rlkit.train.interrupts import interrupts_deferred

if TYPE_CHECKING:
    from ray import ObjectRef

__all__ = ["LearnerFailedError", "OffPolicyOptions", "OffPolicyResult", "train_dqn_ray",
           "train_ray", "train_sac_ray"]


def train_dqn_ray(config: DQNConfig, **options: Any) -> OffPolicyResult:
    """Distributed DQN: :func:`train_ray` with :class:`rlkit.algos.dqn.DQNSpec`, a CPU learner."""
    require_instance("train_dqn_ray", "config", config, DQNConfig, "train_dqn_ray(DQNConfig(...))")
    options.setdefault("learner_gpus", 0)  # small Q-networks gain nothing from a GPU
    build(OffPolicyOptions, "train_dqn_ray", options)  # an unknown option named under this name
    return train_ray(DQNSpec(config), **options)


def train_sac_ray(config: SACConfig, **options: Any) -> OffPolicyResult:
    """Distributed SAC: :func:`train_ray` with :class:`rlkit.algos.sac.SACSpec`; the learner
    asks for a GPU when the cluster has one and keeps its buffer and updates there."""
    require_instance("train_sac_ray", "config", config, SACConfig, "train_sac_ray(SACConfig(...))")
    build(OffPolicyOptions, "train_sac_ray", options)  # an unknown option named under this name
    return train_ray(SACSpec(config), **options)


def train_ray(algo: OffPolicyAlgorithm, **options: Any) -> OffPolicyResult:
    """Train an off-policy algorithm with ``algo.config.num_workers`` rollout workers (each
    ``envs_per_worker`` envs, ``fragment_steps`` per call), a learner that owns the buffer, a
    parameter server and an evaluator; ``options`` are :class:`OffPolicyOptions` fields.

    The rate limiter: after ``E`` env steps the learner has been asked for exactly
    :func:`rlkit.core.common.updates_due` updates (the multiples of ``train_every`` past
    ``learning_starts``), the same ratio as the single-process loop; and at most
    ``max_learner_lag`` learner calls may be queued, so workers cannot run ahead of learning on
    a machine where acting is faster.

    Faults: a failed worker or evaluator is restarted with a fresh seed (at most
    ``max_restarts`` times each, logged in ``history.events``); a failed learner stops the run
    with :class:`LearnerFailedError` naming the last checkpoint (or, with ``learner_restarts``,
    restarts from it), a non-finite value with ``FloatingPointError``, a silent actor with
    ``TimeoutError`` naming its role. Every actor is killed before this returns, also after a
    ``KeyboardInterrupt`` (which saves a checkpoint if ``checkpoint_dir`` is set). Roles:
    ``"worker i"``, ``"learner"``, ``"evaluator"``, ``"parameter server"``.

    Learner group: ``num_learners=W`` starts ``"learner 0"`` ... ``"learner W-1"``, each
    keeping rows ``r::W`` of every fragment in a replay of ``buffer_size / W`` and sampling
    ``batch_size / W`` per update; their gradients are averaged and rank 0 publishes. A
    checkpoint keeps rank 0's learner, not the replay shares: after a restart the ranks refill
    ``learning_starts`` env steps of replay before they train again.
    """
    opts = build(OffPolicyOptions, "train_ray", options)
    return OffPolicyRun(algo, opts).run()


class OffPolicyRun(DriverRun):
    """One :func:`train_ray` run on the shared :class:`DriverRun` loop. Its events: a worker's
    fragment (:meth:`on_fragment`) and an evaluation (:meth:`on_evaluation`)."""

    LEARNER_GROUPS = LEARNER_RESTARTS = True  # each rank keeps a share of the replay

    def __init__(self, algo: OffPolicyAlgorithm, opts: OffPolicyOptions) -> None:
        config = algo.config
        self.SAVE_BUFFER = opts.checkpoint_buffer and opts.num_learners == 1
        super().__init__(opts, config.total_steps, f"{algo.name}, {config.num_workers} workers",
                         algo.name, config)
        check_replay_shares(config.batch_size, config.buffer_size, opts.num_learners)
        self.plan = self.place(config.num_workers, opts.learner_gpus)
        env = make_env(config.env_id, config.seed, algo.action_kind, algo.name,
                       algo.images)  # fail early,
        algo.make_policy_network(env)  # on the action space too (a box it cannot map)
        obs, act_dim = obs_spec(env.observation_space), space_dims(env)[1]
        env.close()
        # for a GPU learner the driver cannot see the GPU's free memory; the learner checks again
        free, where = self.learner_free_memory()
        check_buffer_memory(config.buffer_size, obs, None if algo.action_kind == "discrete"
                            else act_dim, free=free, where=where)
        self.algo, self.config, self.opts = algo, config, opts
        self.launched_steps = self.env_steps
        self.learner_calls: deque[list[ObjectRef]] = deque()  # each: one ref per rank
        self.evaluating = False
        self.eval_weights: ObjectRef | None = None  # the snapshot the pending evaluation scores
        self.eval_at, self.next_eval = 0, next_multiple(self.env_steps, config.eval_every)
        self.learner_busy, self.device = 0.0, "cpu"
        self.weights: Weights = {}
        self.stored = 0

    def role_names(self) -> list[str]:
        return ["parameter server", *self.learner_roles, "evaluator", *self.worker_names()]

    def worker_names(self) -> list[str]:
        return [f"worker {i}" for i in range(self.config.num_workers)]

    # --- the loop's events ----------------------------------------------------------------

    def train(self) -> None:
        for i in range(self.config.num_workers):
            self.launch(i)
        super().train()

    def done(self) -> bool:
        return self.solved

    def launch(self, i: int) -> None:
        """Ask worker ``i`` for its next fragment, unless the step budget is launched."""
        n = min(self.config.fragment_steps, self.config.total_steps - self.launched_steps)
        if n <= 0:
            return
        per_env = self.config.envs_per_worker
        n = -(-n // per_env) * per_env  # what the worker will really take
        if f"worker {i}" not in self.supervisor.handles:  # dropped: its node is gone
            return
        worker = self.supervisor[f"worker {i}"]
        batch_ref, stats_ref = worker.collect.options(num_returns=2).remote(
            n, self.algo.random_action_prob(self.env_steps))
        self.expect(stats_ref, f"worker {i}",
                    lambda ref, i=i, b=batch_ref, n=n: self.on_fragment(ref, i, b, n))
        self.launched_steps += n

    def on_fragment(self, ref: ObjectRef, i: int, batch_ref: ObjectRef, asked: int) -> None:
        """Hand the fragment (by reference: the driver never reads it) to the learner with
        exactly the updates the rate limiter allows; then relaunch the worker."""
        from ray.exceptions import RayError

        try:
            stats = self.supervisor.get(ref, f"worker {i}", "collecting")
        except RayError as error:  # the worker died or its env raised
            self.launched_steps -= asked  # those steps were never collected
            self.restart_role(f"worker {i}", error)
            self.launch(i)
            return
        with interrupts_deferred():  # a checkpoint sees the count and the transitions
            self.env_steps += stats.env_steps
            # Rate limiter: ask the learner for exactly the updates these env steps allow.
            due = updates_owed(self.env_steps, self.config, self.resumed)
            self.learner_calls.append([self.supervisor[role].add_and_train.remote(
                batch_ref, due - self.updates) for role in self.learner_roles])
            for ref, role in zip(self.learner_calls[-1], self.learner_roles):
                self.timeline.launched(ref, role, "add_and_train")  # read in learner_result
            self.updates = due
        for episode_return in stats.episode_returns:
            self.history.log_episode(self.env_steps, self.clock(), episode_return)
        while len(self.learner_calls) > self.opts.max_learner_lag:
            self.learner_result(self.learner_calls.popleft())
        self.maybe_save(self.updates)
        self.launch(i)

    def schedule(self) -> None:
        """Start an evaluation every ``eval_every`` env steps (one at a time)."""
        if self.env_steps >= self.next_eval and not self.evaluating:
            self.eval_at = self.env_steps
            self.next_eval = next_multiple(self.env_steps, self.config.eval_every)
            self.evaluate()

    def learner_result(self, refs: list[ObjectRef]) -> None:
        """Every rank's report of one call (one learner: one report); a lost rank restarts
        the group where ``learner_restarts`` allows."""
        try:
            reports = [self.supervisor.get(ref, role, f"training at env step {self.env_steps}")
                       for ref, role in zip(refs, self.learner_roles)]
        except RoleFailedError as error:
            self.recover_learners(error)
            return
        for ref in refs:
            self.timeline.answered(ref)
        report = reports[0]._replace(seconds=max(r.seconds for r in reports),
                                     loss=float(np.mean([r.loss for r in reports])))
        self.learner_busy += report.seconds
        if not math.isnan(report.loss):
            self.history.log_loss(self.env_steps, report.loss)

    def evaluate(self, weights: ObjectRef | Weights | None = None) -> None:
        """Score ``weights``; by default a snapshot of the learner's weights now, kept in
        ``eval_weights`` (the run's result if this evaluation solves it)."""
        if weights is None:
            weights = self.eval_weights = self.supervisor[self.LEARNER].get_weights.remote()
        c = self.config
        seed = eval_seed(c.seed, len(self.history.eval_steps), c.eval_episodes)
        ref = self.supervisor["evaluator"].evaluate.remote(weights, c.eval_episodes, seed)
        self.expect(ref, "evaluator", lambda r, w=weights: self.on_evaluation(r, w))
        self.evaluating = True

    def on_evaluation(self, ref: ObjectRef, weights: ObjectRef | Weights) -> None:
        """Log the finished evaluation, or restart a failed evaluator and evaluate again."""
        from ray.exceptions import RayError

        self.evaluating = False
        try:
            returns = self.supervisor.get(ref, "evaluator", "evaluating")
        except RayError as error:
            if not self.supervisor.alive(self.LEARNER):  # restart the group, or raise
                self.recover_learners(self.supervisor.failure(
                    error, self.LEARNER, "sending weights to the evaluator"))
                self.evaluate()
                return
            self.restart_role("evaluator", error)
            self.evaluate(weights)
            return
        self.log_evaluation(self.eval_at, self.clock(), float(np.mean(returns)),
                            float(np.std(returns)), self.config.target_return)

    def after_learner_restart(self, saved: Checkpoint) -> None:
        """The group is back at ``saved``, its calls in flight dropped: the rate limiter goes
        on from the checkpoint's update count, after refilling ``learning_starts`` env steps
        where the replay was lost (a group's shares; a checkpoint without the buffer).
        (``self.updates`` is back at the checkpoint's already.)"""
        self.learner_calls.clear()
        self.resumed = dataclasses.replace(saved, env_steps=self.env_steps)

    # --- start, finish, save --------------------------------------------------------------

    def start_roles(self) -> None:
        """Start every actor, load a checkpoint if resuming, publish weights version 1, and
        wait until all are up; the training clock starts after this."""
        import ray

        sup, plan, opts, algo = self.supervisor, self.plan, self.opts, self.algo
        server = sup.start("parameter server", lambda _: ray.remote(ParameterServer).options(
            **sup.options("parameter server")).remote())
        channel = RayChannel(server, opts.timeout_s)
        # Ray 2.60 hides GPUs only from actors that ask for one: tell the learner its device
        device = "cuda" if plan.learner_gpus > 0 else "cpu"
        world = len(self.learner_roles)  # rank 0 publishes the weights
        for rank, role in enumerate(self.learner_roles):
            sup.start(role, lambda r, rank=rank, role=role: ray.remote(OffPolicyLearner).options(
                **sup.options(role)).remote(algo, None if rank else channel, opts.publish_every,
                                            device, rank, world, r))
        learner = sup[self.LEARNER]
        sup.start("evaluator", lambda _: ray.remote(Evaluator).options(
            **sup.options("evaluator")).remote(algo))
        for i in range(self.config.num_workers):
            sup.start(f"worker {i}", lambda restart, i=i: ray.remote(
                RolloutWorker).options(**sup.options(f"worker {i}")).remote(
                algo, i, channel, restart, self.config.envs_per_worker))
        timeout = max(opts.timeout_s, STARTUP_TIMEOUT_S)
        self.form_learner_group(timeout)
        self.restore_learner(timeout)
        sup.get(learner.publish.remote(), self.LEARNER, "starting", timeout)
        sup.wait_started(["evaluator", *self.worker_names()], timeout)
        self.device = sup.get(learner.device_name.remote(), self.LEARNER, "starting", timeout)

    def finish(self) -> None:
        """Drain the learner; keep the weights that solved (the learner trained on while they
        were scored), else the final ones, evaluated unless the last evaluation saw them (a
        failed evaluator is restarted, as during training)."""
        sup = self.supervisor
        while self.learner_calls:
            self.learner_result(self.learner_calls.popleft())
        self.drain("evaluator")
        ref = self.eval_weights if self.solved else sup[self.LEARNER].get_weights.remote()
        self.weights = sup.get(ref, self.LEARNER, "sending its weights")
        steps = self.history.eval_steps
        if not self.solved and (not steps or steps[-1] != self.env_steps):
            self.eval_at = self.env_steps
            self.evaluate(self.weights)
            self.drain("evaluator")
        self.updates = sup.get(sup[self.LEARNER].num_updates.remote(), self.LEARNER, "finishing")
        self.stored = sum(sup.get(sup[r].num_stored.remote(), r, "finishing")
                          for r in self.learner_roles)  # each rank holds its share
        self.save()

    def result(self) -> OffPolicyResult:
        sup = self.supervisor
        return OffPolicyResult(
            history=self.history, solved=self.solved, eval_return=self.eval_return,
            env_steps=self.env_steps, wall_seconds=self.clock(), updates=self.updates,
            weights=self.weights, startup_seconds=self.startup_seconds,
            worker_restarts=sup.restart_count("worker"), learner_busy_seconds=self.learner_busy,
            device=self.device, evaluator_restarts=sup.restarts.get("evaluator", 0),
            checkpoint=self.checkpointer.last, transitions_stored=self.stored)
