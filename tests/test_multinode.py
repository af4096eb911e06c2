"""Every pattern on a cluster of several nodes: a head (the driver, and the roles that ask for
no CPU, pinned there) and three 1-CPU nodes, each a raylet of ``ray.cluster_utils.Cluster`` on
this machine. Plans are made per node and refused before any actor starts when they cannot be
placed; a run that loses a worker's node goes on (the replacement asks for what is left, or the
worker is dropped, logged in ``history.events``) and still solves CartPole.

Losing the learner's node is tested in test_resume.py (every pattern: the run stops, naming it,
and resumes) and here for learner groups: APPO's, on a node that dies silently, restarts from
its checkpoint on another node and solves; Ape-X's and DQN's restart and train on at the rate
limiter's ratio. Notebook 07, on the same kind of cluster, asserts what these tests leave to it:
IMPALA losing a worker's node, and its group losing a learner's node (removed with SIGTERM)."""

import dataclasses

import pytest

from conftest import CLUSTER_IMPALA, NAMING_ALLOWANCE_S, wait_until_no_actors

ray = pytest.importorskip("ray")

from rlkit.algos.a2c import A2CConfig  # noqa: E402
from rlkit.algos.apex import ApexConfig, ApexDQN  # noqa: E402
from rlkit.algos.dqn import DQNConfig  # noqa: E402
from rlkit.algos.ppo import PPOConfig  # noqa: E402
from rlkit.distributed.a3c.driver import train_a3c_ray  # noqa: E402
from rlkit.distributed.apex.driver import train_apex_ray  # noqa: E402
from rlkit.distributed.impala.driver import (  # noqa: E402
    train_appo_ray, train_impala_ray, train_ppo_ray)
from rlkit.algos.sac import SACConfig  # noqa: E402
from rlkit.distributed.off_policy.driver import train_dqn_ray, train_sac_ray  # noqa: E402
from rlkit.distributed.runtime.actor_state import PING_TIMEOUT_S  # noqa: E402
from rlkit.distributed.runtime.placement import cluster_nodes, plan_resources  # noqa: E402

pytestmark = pytest.mark.ray

IMPALA = CLUSTER_IMPALA
#: DQN's budget here: 3x its default of 100k, as a margin. On this test's settings (evaluations
#: every 5k env steps) one-process DQN solved in 20k-60k env steps over seeds 0-29 (median 35k),
#: and DQN on Ray with the one worker such a run keeps, seed 0, in 30k-40k over 6 runs (2-core
#: VM, 2026-11-26); yet one run of this test in ~10 fresh runs of the suite had not solved by
#: 100k: DQN's greedy return swings between evaluations (60 one, 500 the next), so a rare run
#: needs several times the usual budget. What the test checks is that the run survives the lost
#: node and still learns; the budget costs nothing unless a run needs it (it stops when solved).
DQN_BUDGET = 300_000
#: APPO (notebook 08's CartPole settings, asynchronous, V-trace) for a learner group that must
#: restart and then solve: on IMPALA's roles, the same group restart, but its clipped steps solve
#: in about 10k env steps, where IMPALA's two-rank group needed 48k-2.2M (one fresh run in
#: three took over 250 s: IMPALA's unclipped steps can wreck a policy, notebook 06). Its first
#: evaluation, at 10k, comes after the node loss at 3k.
APPO_GROUP = dataclasses.replace(PPOConfig(), synchronous=False, use_vtrace=True,
                                 eval_every=10_000, eval_episodes=10, total_steps=300_000)
# pattern: (run(), the env step at which worker 0's node is removed)
PATTERNS = {
    "dqn": (lambda: train_dqn_ray(DQNConfig(eval_every=5_000, total_steps=DQN_BUDGET)), 2_000),
    "apex": (lambda: train_apex_ray(ApexDQN(DQNConfig(
        eval_episodes=10, envs_per_worker=8, fragment_steps=64), ApexConfig(num_shards=1))),
        2_000),
    "a3c": (lambda: train_a3c_ray(A2CConfig(eval_every=5_000, eval_episodes=10)), 2_000),
    # synchronous rounds: the one worker left sends half a batch a round (issue 38)
    "ppo": (lambda: train_ppo_ray(PPOConfig(eval_episodes=10)), 2_000),
}  # (IMPALA's worker-node loss is notebook 07's section 5, asserted there)


def test_the_plan_is_made_per_node_and_one_that_cannot_fit_is_refused(nodes_cluster):
    nodes_cluster.refill()
    nodes = cluster_nodes()
    assert [n.cpus for n in nodes] == [0.0, 1.0, 1.0, 1.0] and nodes[0].driver
    plan = plan_resources(3, nodes)
    # the learner takes a node of its own; each worker a whole CPU where one is left
    assert plan.node("learner") != nodes[0] and plan.learner_cpus == 1.0
    used = {}
    for role, slot in plan.slots.items():
        used[slot.node_id] = used.get(slot.node_id, 0.0) + slot.cpus
    assert all(used[n.node_id] <= n.cpus for n in nodes if n.node_id in used)
    assert sorted(s.cpus for r, s in plan.slots.items() if r.startswith("worker")) == [
        0.5, 0.5, 1.0]
    # 100 workers: not even with the learner on half its node (50 fit at 0.05 CPU each)
    with pytest.raises(ValueError, match=r"num_workers=100 is too many for a cluster of 4 nodes "
                                         r"of 0, 1, 1, 1 CPUs.*Fix: use at most 50 workers"):
        train_dqn_ray(DQNConfig(num_workers=100))
    assert wait_until_no_actors() == []


@pytest.mark.parametrize("pattern", list(PATTERNS))
def test_a_run_spread_over_the_nodes_survives_a_worker_node_and_solves(nodes_cluster,
                                                                       monkeypatch, pattern):
    run, at = PATTERNS[pattern]
    nodes_cluster.refill()
    nodes_cluster.clear()
    nodes_cluster.remove_node_of(monkeypatch, "worker 0", at)
    result = run()
    head = cluster_nodes()[0].node_id
    learner = "gradient server" if pattern == "a3c" else "learner"
    # the roles that ask for no CPU stay on the driver's node; learner and workers do not
    assert {result.placement[r] for r in result.placement
            if not r.startswith(("worker", "shard", learner))} <= {head}  # (A3C has none)
    assert head not in {result.placement[learner], result.placement["worker 0"]}
    assert len(set(result.placement.values())) >= 3
    lost, _ = nodes_cluster.removed["worker 0"]
    assert result.placement["worker 0"] == lost
    assert any(f"worker 0 lost with node {lost[:8]}" in e for e in result.history.events)
    if pattern == "ppo":
        shrunk = "synchronous rounds shrink to the 1 of 2 workers left (1 of 2 fragments a batch)"
        assert any(shrunk in e for e in result.history.events), result.history.events
        assert result.max_policy_lag == 0  # every fragment acted by the weights it trained
    assert result.solved and result.eval_return >= 475, result.history.events
    assert wait_until_no_actors() == []


def test_a_learner_node_that_dies_silently_restarts_the_group_elsewhere_and_the_run_solves(
        nodes_cluster, monkeypatch, tmp_path, named_times):
    """APPO's learner group (:data:`APPO_GROUP`, on IMPALA's roles and group restart). The
    node's processes are SIGKILLed, as a machine that loses power: Ray lists it as alive for
    about 15 s more, so the lost rank must not be placed back there. (A node removed with
    SIGTERM, which Ray sees go at once, is notebook 07's section 6, IMPALA's group, asserted
    there.)

    The promise, "the lost rank is named within 5 s", is a bound derived from the mechanism:
    the supervisor's ping of the ranks (``PING_TIMEOUT_S``, which the surviving rank, blocked in
    its all-reduce, always takes in full) plus ``NAMING_ALLOWANCE_S`` (3x what the rest took on
    the 2-core VM), well inside the ~15 s Ray takes to list the node dead. It is measured from
    when the driver got control back: the simulated replacement node joins in the driver's
    thread, and on a busy machine that alone can outlast Ray's health checks."""
    nodes_cluster.refill()
    nodes_cluster.clear()
    nodes_cluster.remove_node_of(monkeypatch, "learner 0", 3_000, replace=True, silent=True)
    result = train_appo_ray(APPO_GROUP, num_learners=2, learner_restarts=1,
                            checkpoint_dir=tmp_path, checkpoint_every=5)
    lost, removed_at = nodes_cluster.removed["learner 0"]
    restarts = [e for e in result.history.events if "learner group restarted from" in e]
    assert len(restarts) == 1 and f"node {lost[:8]}" in restarts[0], result.history.events
    assert f"learner 0 on node {lost[:8]}" not in restarts[0]  # placed elsewhere
    named = named_times["learner 0"] - removed_at
    print(f"lost rank named {named:.2f} s after the loss; solved at {result.env_steps:,} env "
          f"steps, {result.wall_seconds:.0f} s (evaluations at {result.history.eval_steps}: "
          f"{result.history.eval_returns}); events: {result.history.events}")
    assert named < PING_TIMEOUT_S + NAMING_ALLOWANCE_S, named
    assert result.solved and result.eval_return >= 475
    assert wait_until_no_actors() == []


@pytest.mark.parametrize("pattern", ["apex", "dqn"])
def test_a_restarted_group_trains_on_from_its_checkpoint(nodes_cluster, monkeypatch, tmp_path,
                                                         pattern):
    """Short runs (IMPALA's group solving through a restart is the test above; DQN's
    and Ape-X's solving with a group is the same code). DQN's ranks lose their replay shares with
    the group: the rate limiter goes on from the checkpoint's update count once
    ``learning_starts`` new env steps are in, to the update. Ape-X's replay lives in the shards,
    on rank 0's node, so rank 1's node is removed: the shards keep every transition through the
    restart."""
    import re

    from rlkit.core.common import updates_due

    nodes_cluster.refill()
    nodes_cluster.clear()
    rank = "learner 1" if pattern == "apex" else "learner 0"
    nodes_cluster.remove_node_of(monkeypatch, rank, 2_000, replace=True)
    config = DQNConfig(total_steps=4_000, learning_starts=1_000, eval_every=4_000,
                       target_return=None)
    options = dict(num_learners=2, learner_restarts=1, checkpoint_dir=tmp_path)
    if pattern == "apex":
        result = train_apex_ray(ApexDQN(dataclasses.replace(
            config, num_workers=1, envs_per_worker=8, fragment_steps=64), ApexConfig(
                num_shards=1)), checkpoint_every=50, **options)
    else:
        result = train_dqn_ray(dataclasses.replace(config, num_workers=1), checkpoint_every=100,
                               **options)
    lost, _ = nodes_cluster.removed[rank]
    restarts = [e for e in result.history.events if "learner group restarted from" in e]
    assert len(restarts) == 1 and f"{rank} lost" in restarts[0], result.history.events
    assert f"node {lost[:8]}" in restarts[0] and result.placement[rank] == lost
    found = re.search(r"step (\d+): .* at update (\d+), ", restarts[0])
    assert found, restarts[0]
    at, saved = map(int, found.groups())
    assert 2_000 <= at < 4_000 and 0 < saved <= updates_due(at, 1_000, config.train_every)
    saved_steps, lost_updates = re.search(r"saved at ([\d,]+) env steps \((\d+) updates lost",
                                          restarts[0]).groups()
    assert int(saved_steps.replace(",", "")) <= at and int(lost_updates) >= 0
    assert result.env_steps >= 4_000
    if pattern == "dqn":
        assert result.updates == saved + updates_due(4_000 - at, 1_000, config.train_every)
    else:
        assert result.updates > saved + 100  # the rate limiter went on from the checkpoint
        assert result.shard_sizes[0] > 4_000 - 100  # (n-step windows end with episodes)
    assert wait_until_no_actors() == []


def test_with_no_room_for_a_lost_rank_the_run_stops_after_timeout_s_naming_the_lost_node(
        nodes_cluster, monkeypatch, tmp_path):
    """No node comes back after a rank's node is lost: the gang restart waits for room as long
    as the run's ``timeout_s`` (20 s here, not the 120 s start-up allowance), then stops naming
    the rank, the node it was lost with and the checkpoint. The 60 s bound is that wait plus 40
    s for the ranks' teardown and a loaded 2-core VM."""
    import time

    from rlkit.distributed.runtime.supervisor import RoleFailedError

    nodes_cluster.refill()
    nodes_cluster.clear()
    nodes_cluster.remove_node_of(monkeypatch, "learner 0", 2_000)
    config = DQNConfig(total_steps=20_000, learning_starts=1_000, target_return=None)
    with pytest.raises(RoleFailedError, match=r"the learner 0 cannot be restarted: no node had "
                                              r"room for its 1 CPU within 20 s \(timeout_s; "
                                              r".*learner 0 was lost with node .*Fix: add a "
                                              r"node, then call again with resume_from=") as info:
        train_dqn_ray(dataclasses.replace(config, num_workers=1), num_learners=2,
                      learner_restarts=1, checkpoint_dir=tmp_path, checkpoint_every=100,
                      timeout_s=20.0)
    lost, removed_at = nodes_cluster.removed["learner 0"]
    assert f"node {lost[:8]}" in str(info.value)
    assert time.perf_counter() - removed_at < 60
    assert wait_until_no_actors() == []


def test_a_worker_beside_a_learner_whose_node_died_silently_is_named_lost_with_it(
        nodes_cluster):
    """A node that loses power takes every actor on it, while Ray lists it alive for about 15
    s more: the error names the learner, its node, and the worker the plan put beside it (its
    ping failed too), not the worker on another node; within the supervisor's ping and
    ``NAMING_ALLOWANCE_S``. (The supervisor is driven directly, with three actors that only
    answer pings: what is tested is the naming, not a run.)"""
    import time

    from rlkit.core.metrics import History
    from rlkit.distributed.runtime.faults import remove_node
    from rlkit.distributed.runtime.parameter_server import ParameterServer
    from rlkit.distributed.runtime.placement import ResourcePlan, Slot
    from rlkit.distributed.runtime.supervisor import Supervisor

    nodes_cluster.refill()
    nodes = cluster_nodes()
    doomed, other = nodes[1], nodes[2]
    plan = ResourcePlan(tuple(nodes), {"learner": Slot(doomed.node_id, 0.5),
                                       "worker 0": Slot(doomed.node_id, 0.5),
                                       "worker 1": Slot(other.node_id, 1.0)})
    sup = Supervisor(60.0, 3, History(), plan=plan)
    sup.handles = {role: ray.remote(ParameterServer).options(**plan.options(role)).remote()
                   for role in plan.slots}
    ray.get([handle.ping.remote() for handle in sup.handles.values()])
    node = next(n for n in nodes_cluster.cluster.worker_nodes if n.node_id == doomed.node_id)
    remove_node(nodes_cluster.cluster, node, silent=True)
    removed_at = time.perf_counter()
    assert doomed.node_id in {n.node_id for n in cluster_nodes()}  # still listed: silent
    error = sup.failure(RuntimeError("connection lost"), "learner", "training")
    named = time.perf_counter() - removed_at
    print(f"named in {named:.2f} s: {error}")
    assert str(error).startswith(f"the learner actor failed on node {doomed.node_id[:8]} (")
    assert "(also lost: worker 0)" in str(error) and "worker 1" not in str(error)
    assert named < PING_TIMEOUT_S + NAMING_ALLOWANCE_S
    for handle in sup.handles.values():
        ray.kill(handle)
    assert wait_until_no_actors() == []


def test_a_sac_learner_group_keeps_the_update_ratio_and_every_transition(nodes_cluster):
    """A short run (a group's arithmetic is test_learner_group.py's; a group solving CartPole
    is notebook 07's and the restart test's; DQN's group, the same OffPolicyLearner code, is the
    restart test above): the ranks on two nodes, the rate limiter's count of updates, each
    transition stored by exactly one rank."""
    from rlkit.core.common import updates_due

    nodes_cluster.refill()
    config = SACConfig(total_steps=1_200, learning_starts=400, eval_every=1_200,
                       eval_episodes=1, hidden=(32, 32), target_return=None)
    result = train_sac_ray(config, num_learners=2)
    head = cluster_nodes()[0].node_id
    ranks = {result.placement["learner 0"], result.placement["learner 1"]}
    assert len(ranks) == 2 and head not in ranks
    assert result.env_steps == config.total_steps == result.transitions_stored
    assert result.updates == updates_due(config.total_steps, config.learning_starts,
                                         config.train_every) > 0
    assert wait_until_no_actors() == []


def test_learner_groups_are_refused_where_a_driver_runs_none_and_need_a_checkpoint(
        nodes_cluster, tmp_path):
    with pytest.raises(ValueError, match=r"num_learners=2 is not supported by A3CRun yet"
                                         r".*Fix: .*train_apex_ray"):
        train_a3c_ray(A2CConfig(), num_learners=2)
    with pytest.raises(ValueError, match=r"learner_restarts=1 is not supported by A3CRun"):
        train_a3c_ray(A2CConfig(), learner_restarts=1, checkpoint_dir=tmp_path)
    with pytest.raises(ValueError, match=r"num_learners=3 must divide batch_size=128: each "
                                         r"rank samples an equal share"):
        train_sac_ray(SACConfig(), num_learners=3)
    with pytest.raises(ValueError, match=r"num_learners=3 must divide batch_size="):
        train_apex_ray(ApexDQN(DQNConfig(), ApexConfig()), num_learners=3)
    with pytest.raises(ValueError, match=r"learner_restarts=1 .*checkpoint_dir is not set"):
        train_impala_ray(IMPALA, learner_restarts=1)
    with pytest.raises(ValueError, match=r"num_learners=3 must divide batch_fragments=8"):
        train_impala_ray(IMPALA, num_learners=3)
    assert wait_until_no_actors() == []
