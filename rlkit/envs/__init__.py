"""Environments: building one by id and seed, the one env runner (a vector env stepped into
time-major fragments), and greedy evaluation."""

from rlkit.envs.breakout import register as _register_breakout

_register_breakout()  # "rlkit/BreakoutMinAtar-v0", buildable by id in every process
