"""Environments: building one by id and seed, the one env runner (a vector env stepped into
time-major fragments), and greedy evaluation."""
