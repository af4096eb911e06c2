"""The distributed roles as plain classes, no Ray."""

import numpy as np
import pytest
import torch

from rlkit.algos.dqn import DQNConfig, DQNSpec
from rlkit.core.common import evaluation_due, updates_due
from rlkit.distributed.off_policy.roles import OffPolicyLearner, RolloutWorker
from rlkit.distributed.runtime.placement import plan_resources
from rlkit.distributed.runtime.evaluator import Evaluator
from rlkit.distributed.runtime.parameter_server import LocalChannel, ParameterServer
from rlkit.train import train_dqn

CFG = DQNConfig(hidden=(32, 32), batch_size=16, learning_starts=100, total_steps=2000)
SPEC = DQNSpec(CFG)


def test_parameter_server_versions():
    ps = ParameterServer()
    assert ps.get_version() == 0 and ps.get_if_newer(0) is None
    assert ps.publish({"w": 1}) == 1
    assert ps.get_if_newer(0) == (1, {"w": 1})
    assert ps.get_if_newer(1) is None  # nothing new: the worker keeps its weights
    assert ps.publish({"w": 2}) == 2 and ps.get_if_newer(1) == (2, {"w": 2})


def test_rollout_worker_fragment_shapes_and_weight_sync():
    ps = ParameterServer()
    learner = OffPolicyLearner(SPEC, LocalChannel(ps), publish_every=5)
    worker = RolloutWorker(SPEC, 0, LocalChannel(ps))
    batch, stats = worker.collect(64, random_action_prob=0.5)
    assert stats.weights_version == 0  # nothing published yet
    assert batch.obs.shape == (64, 4) and batch.obs.dtype == np.float32
    assert batch.actions.shape == (64,) and batch.actions.dtype == np.int64
    assert set(batch.actions.tolist()) <= {0, 1}
    assert batch.rewards.shape == batch.terminations.shape == (64,)
    assert stats.env_steps == 64 and stats.worker == 0
    learner.publish()
    assert ps.get_version() == 1
    _, stats = worker.collect(8, random_action_prob=0.0)
    assert stats.weights_version == 1
    for (k, v), p in zip(learner.get_weights().items(), worker.net.state_dict().values()):
        np.testing.assert_array_equal(v, p.numpy())


def test_workers_have_different_random_streams():
    a, b = RolloutWorker(SPEC, 0), RolloutWorker(SPEC, 1)
    assert not np.array_equal(a.collect(50, 1.0)[0].obs, b.collect(50, 1.0)[0].obs)
    # a restarted worker gets a fresh stream too, not a replay of the dead one's
    c = RolloutWorker(SPEC, 0, restart=1)
    assert not np.array_equal(RolloutWorker(SPEC, 0).collect(50, 1.0)[0].obs,
                              c.collect(50, 1.0)[0].obs)


def test_learner_trains_as_told_and_publishes_every_k_updates():
    ps = ParameterServer()
    learner = OffPolicyLearner(SPEC, LocalChannel(ps), publish_every=5)
    batch, _ = RolloutWorker(SPEC, 0).collect(200, 1.0)
    metrics = learner.add_and_train(batch, 0)
    assert metrics.updates == 0 and metrics.buffer_size == 200 and np.isnan(metrics.loss)
    metrics = learner.add_and_train(batch, 12)
    assert metrics.updates == 12 and np.isfinite(metrics.loss)
    assert ps.get_version() == 2  # published after updates 5 and 10


@pytest.mark.parametrize("steps, due", [(0, 0), (100, 0), (101, 0), (102, 1), (1100, 500)])
def test_rate_limiter_arithmetic(steps, due):
    assert updates_due(steps, learning_starts=100, train_every=2) == due


@pytest.mark.parametrize("steps, evaluated, budget, due", [
    (999, [], None, False), (1000, [], None, True),  # the first multiple of every=1000
    (1999, [1024], None, False), (2000, [1024], None, True),  # from the last evaluation's step
    (4096, [1024], None, True),  # a step that jumps several multiples: one evaluation...
    (4999, [4096], None, False), (5000, [4096], None, True),  # ...and on from it
    (2500, [2000], 2500, True), (2400, [2000], 2500, False),  # the budget's end evaluates
])
def test_the_one_evaluation_rule(steps, evaluated, budget, due):
    assert evaluation_due(steps, evaluated, 1000, budget) is due


def test_single_process_does_the_updates_the_rate_limiter_allows():
    cfg = DQNConfig(total_steps=600, learning_starts=200, batch_size=32, eval_every=600,
                    eval_episodes=1, target_return=None, hidden=(32, 32))
    result = train_dqn(cfg)
    assert result.learner.updates == updates_due(600, 200, cfg.train_every) == 200


def test_evaluator_returns_one_return_per_episode():
    learner = OffPolicyLearner(SPEC)
    returns = Evaluator(SPEC).evaluate(learner.get_weights(), episodes=3, seed=0)
    assert returns.shape == (3,) and (returns >= 1).all()


def test_resource_plan_fits_the_machine():
    two = plan_resources(2, 2.0)
    assert two.learner_cpus + 2 * two.worker_cpus <= 2.0 and two.worker_cpus == 0.5
    four = plan_resources(4, 2.0)
    assert four.learner_cpus + 4 * four.worker_cpus <= 2.0
    big = plan_resources(4, 16.0)
    assert big.worker_cpus == 1.0 and big.learner_cpus == 1.0
    with pytest.raises(ValueError, match="num_workers=100 is too many"):
        plan_resources(100, 2.0)
    with pytest.raises(ValueError, match="num_workers=0"):
        plan_resources(0, 2.0)
    # a 16-core machine: 15 workers with a whole core each beside the learner
    sixteen = plan_resources(15, 16.0)
    assert sixteen.worker_cpus == 1.0 and sixteen.learner_cpus + 15 * sixteen.worker_cpus == 16
    # the learner's GPU: taken when the cluster has one, refused up front when it does not
    assert plan_resources(2, 16.0, None, cluster_gpus=1.0).learner_gpus == 1.0
    assert plan_resources(2, 2.0, None, cluster_gpus=0.0).learner_gpus == 0.0
    with pytest.raises(ValueError, match="learner_gpus=1 but no node has that many GPUs.*Fix:"):
        plan_resources(2, 2.0, 1, cluster_gpus=0.0)


def test_workers_to_fill_gives_every_idle_cpu_a_worker_and_the_plan_counts_idle_cpus():
    from rlkit.distributed.runtime.placement import Node, workers_to_fill

    def nodes(*cpus):
        return [Node(f"n{i}", "10.0.0.1", c, 0.0, i == 0) for i, c in enumerate(cpus)]

    assert plan_resources(2, 16.0).idle_cpus == 13.0  # the fixed default leaves a big node idle
    fill = workers_to_fill(nodes(16.0))
    assert fill == 15 and plan_resources(fill, 16.0).idle_cpus == 0.0
    assert plan_resources(fill, 16.0).worker_cpus == 1.0
    # a head with no CPU and three 4-CPU nodes; two learner ranks, one Ape-X shard
    cluster = nodes(0.0, 4.0, 4.0, 4.0)
    fill = workers_to_fill(cluster, learners=2, shards=1)
    assert fill == 9
    plan = plan_resources(fill, cluster, learners=2, shards=1)
    assert plan.idle_cpus == 0.0 and all(
        s.cpus == 1.0 for r, s in plan.slots.items() if r.startswith("worker"))
    assert workers_to_fill(nodes(2.0)) == 1 and workers_to_fill(nodes(1.0)) == 1  # never 0
    assert plan_resources(2, 2.0).idle_cpus == 0.0  # the 2-core default uses both cores


def test_the_learner_keeps_a_whole_cpu_up_to_a_named_count_of_workers():
    """Notebook 07's nodes (a head with no CPU, three of 1 CPU): 40 workers at 0.05 CPU fit
    beside the learner's whole CPU; the 41st halves the learner, and the plan says so; past
    50 the refusal names both counts."""
    from rlkit.distributed.runtime.placement import MIN_WORKER_CPUS, Node

    cluster = [Node(f"n{i}", "10.0.0.1", c, 0.0, i == 0) for i, c in enumerate((0, 1, 1, 1))]
    whole = plan_resources(40, cluster)
    assert whole.learner_cpus == 1.0 and not whole.learner_halved
    assert whole.whole_learner_workers == 40 == int(2 / MIN_WORKER_CPUS)
    halved = plan_resources(41, cluster)
    assert halved.learner_cpus == 0.5 and halved.learner_halved
    assert halved.whole_learner_workers == 40
    with pytest.raises(ValueError, match=r"Fix: use at most 50 workers \(at most 40 keep the "
                                         r"learner on a whole CPU; more put it on half its node\)"):
        plan_resources(51, cluster)
    # one 2-CPU node: half the node is a whole CPU, so nothing is halved and both counts agree
    with pytest.raises(ValueError, match=r"Fix: use at most 20 workers, or a bigger cluster"):
        plan_resources(21, 2.0)
    assert not plan_resources(20, 2.0).learner_halved


@pytest.mark.parametrize("cpus", [1.0, 2.0, 3.0, 16.0])
def test_resource_plan_never_overbooks(cpus):
    for workers in range(1, 9):
        plan = plan_resources(workers, cpus)
        assert plan.learner_cpus + workers * plan.worker_cpus <= cpus, (workers, plan)
        assert plan.worker_cpus * 1e4 == int(plan.worker_cpus * 1e4)  # Ray's 1e-4 granularity


def test_rate_limiter_matches_the_single_process_when_starts_is_odd():
    # single process with learning_starts=1001, train_every=2 updates at steps 1002 and 1004
    assert updates_due(1004, learning_starts=1001, train_every=2) == 2
    cfg = DQNConfig(total_steps=600, learning_starts=201, batch_size=32, eval_every=600,
                    eval_episodes=1, target_return=None, hidden=(32, 32))
    assert train_dqn(cfg).learner.updates == updates_due(600, 201, cfg.train_every) == 200


def test_sac_learner_weights_are_copies():
    from rlkit.algos.sac import SACConfig, SACLearner

    learner = SACLearner(3, 1, np.array([-2.0]), np.array([2.0]), SACConfig(hidden=(8,)))
    weights = learner.get_weights()
    assert set(weights) == set(learner.actor.state_dict())  # the whole actor, nothing renamed
    with torch.no_grad():
        for p in learner.actor.parameters():
            p.add_(1.0)
    assert not any(np.array_equal(weights[k], v.numpy())
                   for k, v in learner.actor.state_dict().items() if k in weights
                   and k not in ("scale", "bias"))


def test_one_seed_formula_for_every_role():
    """``role_seed`` (issue 39) gives each role the seed it had before it existed (the
    one-process runs stay bit-identical), keeps a run's roles apart, and moves every role to a
    new stream when it is restarted or the run is resumed."""
    from rlkit.core.common import ROLE_SEEDS, role_seed, worker_seed

    seed = 12
    assert [worker_seed(seed, i, r) for i, r in ((0, 0), (1, 0), (0, 1))] == [
        1012, 2012, 101_012]  # seed + 1000 * (i + 1) + 100_000 * restart, by hand
    assert role_seed(seed, "replay") == 13 and role_seed(seed, "shard", 1) == 23
    assert role_seed(seed, "replay share", 2) == 12 + 2 * 7919
    assert role_seed(seed, "learner sampler", 1) == 12 + 7 + 7919
    assert role_seed(seed, "one-process runner", 500) == 512
    firsts = [role_seed(seed, role, i) for role, (_, stride) in ROLE_SEEDS.items()
              if role != "one-process runner" for i in (range(4) if stride else [0])]
    assert len(set(firsts)) == len(firsts)  # no two roles (or copies) of a run share a stream
    for role in ROLE_SEEDS:  # a restart or a resume (1000 incarnations) never reuses one
        assert role_seed(seed, role, 1, 1) not in firsts
        assert role_seed(seed, role, 1, 1000) not in firsts
    assert role_seed(2**31 - 1, "worker", 3, 1000) < 2**31  # always a valid seed
