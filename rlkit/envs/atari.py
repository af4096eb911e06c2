"""Atari through ale-py, built by id like every other env: ``"Atari/Pong-v5"`` and six more.

Each id is ALE's v5 game (sticky actions 0.25, the minimal action set, at most 108,000 frames
an episode) with the preprocessing of the DQN papers, done inside ale-py's C++ vector env
(``ale_py.vector_env.AtariVectorEnv``, no opencv): every 4th frame (the max of the last two),
grey, 84x84, the last 4 stacked, up to 30 no-ops at a reset, FIRE pressed where a game needs
it. An observation is ``(4, 84, 84)`` uint8; rewards are the game's own (not clipped), so an
episode's return is its score. A worker's copies are one such vector env stepped by one thread
(the worker's one CPU); :class:`AtariFrames` is the same with one copy, as a plain
``gym.Env``, for probing spaces and for evaluation.

ale-py (GPL-2.0, ROMs in its wheel) is not a dependency of rlkit (MIT): ``make install``
installs it, as gymnasium's own ``[atari]`` extra does, and rlkit imports it only when one of
these ids is built. Registering the ids imports nothing.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

#: ale-py's version this module is written and tested against.
ALE_PY = "ale-py==0.12.1"
#: The games registered as ``Atari/<Name>-v5``: the seven of the first DQN paper (Mnih et al.,
#: 2013), as ale-py names their ROMs.
GAMES = {"Pong": "pong", "Breakout": "breakout", "BeamRider": "beam_rider", "Enduro": "enduro",
         "Qbert": "qbert", "Seaquest": "seaquest", "SpaceInvaders": "space_invaders"}
#: ALE v5's rules; the preprocessing is ale-py's defaults (listed in the module docstring).
V5 = {"repeat_action_probability": 0.25, "full_action_space": False,
      "max_num_frames_per_episode": 108_000, "reward_clipping": False}


def _vector_env_class() -> Any:
    try:
        from ale_py.vector_env import AtariVectorEnv
    except ImportError:
        raise ImportError(f"Atari ids need ale-py, which is not installed. Fix: pip install "
                          f"{ALE_PY!r} (GPL-2.0; `make install` installs it), or use "
                          f"'rlkit/BreakoutMinAtar-v0', which needs nothing more.") from None
    return AtariVectorEnv


def atari_vector_env(game: str, num_envs: int = 1, **kwargs: Any) -> gym.vector.VectorEnv:
    """``num_envs`` copies of ``game`` in one ale-py vector env, stepped by one thread, with
    gymnasium's next-step autoreset (what :class:`~rlkit.envs.runner.EnvRunner` expects)."""
    kwargs.pop("render_mode", None)  # (gymnasium's make_vec passes it; frames need no window)
    return _vector_env_class()(game, num_envs, num_threads=1, **{**V5, **kwargs})


class AtariFrames(gym.Env):
    """One copy of :func:`atari_vector_env` as a plain ``gym.Env``: ``reset`` and ``step``
    unbatched. Step it until an episode ends, then ``reset`` it, as any gym env."""

    metadata = {"render_modes": []}

    def __init__(self, game: str, **kwargs: Any) -> None:
        self.vec = atari_vector_env(game, 1, **kwargs)
        self.observation_space = self.vec.single_observation_space
        self.action_space = self.vec.single_action_space

    def reset(self, *, seed: int | None = None, options: dict | None = None
              ) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        obs, info = self.vec.reset(seed=seed)
        return obs[0], {k: v[0] for k, v in info.items()}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        obs, reward, terminated, truncated, info = self.vec.step(np.asarray([action]))
        return (obs[0], float(reward[0]), bool(terminated[0]), bool(truncated[0]),
                {k: v[0] for k, v in info.items()})

    def close(self) -> None:
        self.vec.close()


def register() -> None:
    """Register ``Atari/<Name>-v5`` for every game in :data:`GAMES` (``rlkit.envs`` does it on
    import; nothing is imported from ale-py until one is built)."""
    for name, game in GAMES.items():
        env_id = f"Atari/{name}-v5"
        if env_id not in gym.registry:
            gym.register(env_id, entry_point="rlkit.envs.atari:AtariFrames",
                         vector_entry_point="rlkit.envs.atari:atari_vector_env",
                         kwargs={"game": game})
