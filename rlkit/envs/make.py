"""Environment construction and the checks that an environment fits an algorithm.

Every environment in the series is built here, from an id and a seed, inside the process that
uses it (a rollout worker builds its own; environments are never pickled between processes).
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence

import gymnasium as gym
import numpy as np

from rlkit.core.spaces import obs_spec
from rlkit.core.types import ActionKind

__all__ = ["ActionKind", "check_action_space", "check_env_id", "check_worker_env_ids", "make_env",
           "space_dims"]


def check_env_id(env_id: str, field: str = "env_id") -> None:
    """Raise a ``ValueError`` naming ``field`` if ``env_id`` is not a registered gymnasium id.

    An id of the form ``"package.module:Name-v0"`` first imports ``package.module`` (which
    registers ``Name-v0``), as :func:`gymnasium.make` does; that is how an environment defined
    outside gymnasium reaches every Ray worker by id alone.

    Args:
        env_id: A gymnasium id such as ``"CartPole-v1"``.
        field: The config field the id came from, named in the error message.
    """
    name = env_id
    if isinstance(env_id, str) and ":" in env_id:
        module, _, name = env_id.partition(":")
        try:
            importlib.import_module(module)
        except ImportError as error:
            raise ValueError(f"{field}={env_id!r}: the module {module!r} before the ':' cannot "
                             f"be imported ({error}). Fix: check its spelling, or install the "
                             f"package that defines the environment.") from error
    if not isinstance(env_id, str) or name not in gym.registry:
        close = [name for name in gym.registry if isinstance(env_id, str)
                 and name.lower().startswith(env_id.split("-")[0].lower()[:4])][:5]
        hint = f" Close matches: {close}." if close else ""
        raise ValueError(
            f"{field}={env_id!r} is not a registered gymnasium environment.{hint} "
            f"Fix: use an id from gymnasium.registry, e.g. 'CartPole-v1' or 'Pendulum-v1'; for "
            f"an env of your own, name the module that registers it before the id, "
            f"'my_package.my_envs:{name if isinstance(env_id, str) else 'MyEnv-v0'}' (it is "
            f"imported first, here and in every Ray worker)."
        )


def check_action_space(env: gym.Env, kind: ActionKind, algorithm: str,
                       images: bool = False) -> None:
    """Raise a ``ValueError`` if ``env``'s action or observation space does not fit
    ``algorithm``.

    Args:
        env: The environment to check.
        kind: ``"discrete"`` (DQN picks one of n actions) or ``"continuous"`` (SAC outputs a
            real vector in a box).
        algorithm: The algorithm's name, for the message.
        images: Whether ``algorithm`` takes image observations (see
            :func:`rlkit.core.spaces.obs_spec`); a vector is always taken.
    """
    space = env.action_space
    env_id = env.spec.id if env.spec is not None else type(env).__name__
    if kind == "discrete" and not isinstance(space, gym.spaces.Discrete):
        raise ValueError(
            f"{algorithm} needs a discrete action space, but {env_id} has {space}. "
            f"Fix: choose an env with gymnasium.spaces.Discrete actions (e.g. 'CartPole-v1'), "
            f"or use SAC for continuous actions."
        )
    if kind == "continuous" and not (isinstance(space, gym.spaces.Box) and space.shape is not None
                                     and len(space.shape) == 1):
        raise ValueError(
            f"{algorithm} needs a continuous (1-D Box) action space, but {env_id} has {space}. "
            f"Fix: choose an env with gymnasium.spaces.Box actions (e.g. 'Pendulum-v1'), "
            f"or use DQN for discrete actions."
        )
    obs_spec(env.observation_space, env_id, algorithm, images)


def make_env(env_id: str, seed: int, action_kind: ActionKind | None = None,
             algorithm: str = "this algorithm", images: bool = False) -> gym.Env:
    """Build ``env_id``, seed it, and optionally check its action space.

    The returned environment has been reset once with ``seed`` (so its RNG is seeded) and its
    action space is seeded with ``seed`` too (so random exploration actions are reproducible).
    Call ``env.reset()`` again to start the first episode.

    Args:
        env_id: A registered gymnasium id.
        seed: Seed for the environment and its action space.
        action_kind: If given, ``"discrete"`` or ``"continuous"``; a mismatch raises.
        algorithm: The algorithm's name, used in the mismatch message.
        images: Whether ``algorithm`` takes image observations (checked with the actions).

    Returns:
        The seeded environment.
    """
    check_env_id(env_id)
    env = gym.make(env_id)
    if action_kind is not None:
        try:
            check_action_space(env, action_kind, algorithm, images)
        except ValueError:
            env.close()
            raise
    env.reset(seed=int(seed))
    env.action_space.seed(int(seed))
    return env


def space_dims(env: gym.Env) -> tuple[int, int]:
    """Return ``(obs_dim, action_dim)``: n actions for a Discrete space, the vector size for a
    Box."""
    obs_dim = int(np.prod(env.observation_space.shape))
    space = env.action_space
    act_dim = int(space.n) if isinstance(space, gym.spaces.Discrete) else int(np.prod(space.shape))
    return obs_dim, act_dim


def check_worker_env_ids(env_ids: Sequence[str | None] | None, num_workers: int, env_id: str,
                         seed: int, action_kind: ActionKind, algorithm: str
                         ) -> tuple[list[str | None], tuple[int, int]]:
    """The env id each worker collects with (``None``: ``env_id``, which the evaluator always
    uses), checked here, before any actor starts: one per worker, each buildable for
    ``algorithm``, each with ``env_id``'s spaces (the workers share one network).

    Returns:
        ``(ids, (obs_dim, action_dim))``: one id or ``None`` per worker, and ``env_id``'s sizes.
    """
    ids = list(env_ids) if env_ids is not None else [None] * num_workers  # (one per worker:
    # the config's rule, A2CConfig.check)
    sizes: tuple[int, int] = (0, 0)
    for each in dict.fromkeys([env_id, *[e for e in ids if e]]):
        probe = make_env(each, seed, action_kind, algorithm)
        each_sizes = space_dims(probe)
        probe.close()
        if each == env_id:
            sizes = each_sizes
        elif each_sizes != sizes:
            raise ValueError(f"worker_env_ids has {each!r}, whose spaces {each_sizes} differ "
                             f"from env_id={env_id!r}'s {sizes}: the workers share one network. "
                             f"Fix: give ids of the same shapes.")
    return ids, sizes
