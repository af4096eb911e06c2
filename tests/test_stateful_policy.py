"""The runner's stateful-policy hook (issue 39): a policy may carry a state from step to step
(a recurrent network's hidden state); the runner keeps it across calls, resets it for an env
whose new episode begins, and records it at the start of each fragment so that a learner can
replay the rows from it. Stateless policies are called as before.

The proof that the hook carries what memory needs: a small recurrent policy, trained in one
process on the runner's fragments (REINFORCE, replaying each fragment from its recorded state),
learns a task that no stateless policy can do better than chance on."""

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from rlkit.envs.runner import EnvRunner

RECALL = "rlkit-tests/Recall-v0"
EPISODE = 5  # the cue, three blank steps, the question


class Recall(gym.Env):
    """Step 0 shows a cue, -1 or +1, as ``obs = [cue, 0]``; the next steps show ``[0, 0]``; the
    last shows ``[0, 1]``, the question: action 1 if the cue was +1, action 0 if -1, earns 1.
    Nothing else earns anything. At the question every episode looks the same, so a policy
    without memory is right half the time."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.cue, self.t = (1.0 if self.np_random.random() < 0.5 else -1.0), 0
        return np.array([self.cue, 0.0], np.float32), {}

    def step(self, action):
        self.t += 1
        if self.t == EPISODE:
            return np.zeros(2, np.float32), float(int(action) == (self.cue > 0)), True, False, {}
        return np.array([0.0, float(self.t == EPISODE - 1)], np.float32), 0.0, False, False, {}


if RECALL not in gym.registry:
    gym.register(RECALL, entry_point=Recall)


class Recurrent(nn.Module):
    """A GRU cell and a linear head: ``(obs, h) -> (logits, h')``; the runner's policy is
    :meth:`act`, a :class:`~rlkit.core.types.StatefulPolicy` through :meth:`initial_state`."""

    def __init__(self, memory: bool = True, hidden: int = 16) -> None:
        super().__init__()
        self.memory, self.hidden = memory, hidden
        self.cell = nn.GRUCell(2, hidden)
        self.head = nn.Linear(hidden, 2)
        self.rng = np.random.default_rng(0)

    def initial_state(self, num_envs: int) -> np.ndarray:
        return np.zeros((num_envs, self.hidden), np.float32)

    def step(self, obs: torch.Tensor, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.cell(obs, h if self.memory else torch.zeros_like(h))  # stateless: h forgotten
        return self.head(h), h

    @torch.no_grad()
    def __call__(self, obs: np.ndarray, state: np.ndarray):
        logits, h = self.step(torch.as_tensor(obs), torch.as_tensor(state))
        probs = torch.softmax(logits, -1).numpy()
        actions = (self.rng.random(len(obs)) < probs[:, 1]).astype(np.int64)
        return actions, None, h.numpy()

    def replay(self, fragment) -> torch.Tensor:
        """``(T, N)`` log-probabilities of the fragment's actions, recomputed from its recorded
        first state, each env's state reset after its reset rows as the runner did."""
        h, out = torch.as_tensor(fragment.policy_state), []
        for t in range(len(fragment.obs)):
            logits, h = self.step(torch.as_tensor(fragment.obs[t]), h)
            out.append(torch.log_softmax(logits, -1).gather(
                1, torch.as_tensor(fragment.actions[t])[:, None]).squeeze(1))
            h = torch.where(torch.as_tensor(fragment.resets[t])[:, None], 0.0, h)
        return torch.stack(out)


def train_and_score(memory: bool, updates: int = 60) -> float:
    """REINFORCE on 32 envs (a fragment of two episodes and their reset rows per update); the
    share of questions answered right over the last 20 updates."""
    torch.manual_seed(0)
    net = Recurrent(memory)
    optimizer = torch.optim.Adam(net.parameters(), lr=0.02)
    runner = EnvRunner(RECALL, 0, "discrete", "REINFORCE", num_envs=32)
    scores = []
    for _ in range(updates):
        fragment = runner.run(2 * (EPISODE + 1), net, fixed_length=True)
        rewards = torch.as_tensor(fragment.rewards)
        real = ~torch.as_tensor(fragment.resets)
        ends = torch.as_tensor(fragment.ends)
        returns, later = torch.zeros_like(rewards), torch.zeros(rewards.shape[1])
        for t in reversed(range(len(rewards))):  # the episode's reward, at each of its steps
            later = rewards[t] + later * (~ends[t])
            returns[t] = later
        advantage = returns - 0.5  # chance as the baseline
        loss = -(net.replay(fragment) * advantage)[real].mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scores.append(float(fragment.rewards.sum() / fragment.ends.sum()))
    runner.close()
    return float(np.mean(scores[-20:]))


@pytest.mark.slow
def test_a_recurrent_policy_learns_what_a_stateless_one_cannot():
    """60 updates each (5-20 s on the 2-core VM): the recurrent one answers every question
    right over its last 20 (it gets there by about update 30); the stateless one stays at
    chance."""
    assert train_and_score(memory=True) >= 0.95
    assert train_and_score(memory=False) <= 0.65  # chance is 0.5: nothing to remember with


def test_the_state_persists_across_calls_and_restarts_with_each_episode():
    """Three envs in lockstep (every episode is 5 steps): a fragment that starts mid-episode
    records the state the runner carried on with (the one the previous fragment's rows lead
    to), and after the reset row every env's state is the initial one again."""
    net = Recurrent()
    runner = EnvRunner(RECALL, 0, "discrete", "REINFORCE", num_envs=3)
    first = runner.run(3, net, fixed_length=True)
    np.testing.assert_array_equal(first.policy_state, np.zeros((3, 16), np.float32))
    second = runner.run(3, net, fixed_length=True)  # steps 4 and 5, then the reset row
    assert np.abs(second.policy_state).sum() > 0
    with torch.no_grad():  # replaying the first fragment from its state gives the second's
        h = torch.as_tensor(first.policy_state)
        for t in range(3):
            h = net.step(torch.as_tensor(first.obs[t]), h)[1]
    np.testing.assert_allclose(second.policy_state, h.numpy(), rtol=1e-6)
    assert second.resets[-1].all() and not second.resets[:-1].any()
    third = runner.run(1, net, fixed_length=True)  # a new episode: from the initial state
    np.testing.assert_array_equal(third.policy_state, np.zeros((3, 16), np.float32))
    runner.close()


def test_a_stateless_policy_is_called_as_before_and_records_no_state():
    runner = EnvRunner(RECALL, 0, "discrete", "REINFORCE", num_envs=2)
    fragment = runner.run(4, lambda obs: np.zeros(len(obs), np.int64))
    assert fragment.policy_state is None and runner.policy_state is None
    runner.close()


@pytest.mark.parametrize("num_envs", [1, 4])
def test_a_state_of_another_shape_starts_over(num_envs):
    """A runner handed another stateful policy (another state shape) starts it from its own
    initial state, not from the last policy's."""
    runner = EnvRunner(RECALL, 0, "discrete", "REINFORCE", num_envs=num_envs)
    runner.run(2, Recurrent(hidden=8), fixed_length=True)
    fragment = runner.run(2, Recurrent(hidden=4), fixed_length=True)
    assert fragment.policy_state.shape == (num_envs, 4) and not fragment.policy_state.any()
    runner.close()
