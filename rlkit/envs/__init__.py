"""Environments: building one by id and seed, the one env runner (a vector env stepped into
time-major fragments), and greedy evaluation."""

from rlkit.envs.atari import register as _register_atari
from rlkit.envs.breakout import register as _register_breakout

_register_breakout()  # "rlkit/BreakoutMinAtar-v0", buildable by id in every process
_register_atari()  # "Atari/Pong-v5" and six more (ale-py imported only when one is built)
