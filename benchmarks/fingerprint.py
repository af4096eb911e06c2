"""Fingerprints of the reproducible runs, to prove a refactor changed nothing they compute.

For single-process DQN and SAC (seeds 0-2, default configs): whether it solved, the env steps
of the solving evaluation, and a SHA-256 of its history with the wall-clock columns left out
(episode returns, evaluations and losses, against env steps). Two commits whose fingerprints
agree ran bit-identical training. Not part of ``make bench``: run it before and after a change.

    python -m benchmarks.fingerprint [--seeds 0,1,2] [--algos dqn,sac]
"""

from __future__ import annotations

import hashlib
import json

from benchmarks.common import benchmark_parser

CLOCK_FIELDS = ("episode_seconds", "eval_seconds")


def history_hash(history: object) -> str:
    """SHA-256 of a :class:`rlkit.core.metrics.History` without its wall-clock columns."""
    data = {k: v for k, v in history.to_dict().items() if k not in CLOCK_FIELDS}
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def main() -> None:
    parser = benchmark_parser(__doc__, "0,1,2")
    parser.add_argument("--algos", default="dqn,sac")
    args = parser.parse_args()

    from rlkit.algos.dqn import DQNConfig
    from rlkit.algos.sac import SACConfig
    from rlkit.train.loop import train_dqn, train_sac

    runs = {"dqn": (train_dqn, DQNConfig), "sac": (train_sac, SACConfig)}
    for name in args.algos.split(","):
        train, config = runs[name]
        for seed in args.seeds:
            result = train(config(seed=seed))
            print(json.dumps({"run": name, "seed": seed, "solved": result.solved,
                              "env_steps": result.history.eval_steps[-1],
                              "history_sha256": history_hash(result.history)}), flush=True)


if __name__ == "__main__":
    main()
