"""Time to solve CartPole-v1, per seed: rlkit's PPO in one process (against Stable-Baselines3's
PPO with the RL Baselines3 Zoo settings, seed by seed in the same run, when it is installed),
PPO on Ray (synchronous) and APPO (asynchronous, V-trace targets); and PPO with a Gaussian
policy on Pendulum-v1 (:data:`rlkit.algos.ppo.PENDULUM`, one process; solved: a deterministic
evaluation of 10 episodes, every 10,000 env steps, with a mean of at least -200).

"Solved" is the first greedy evaluation of 20 episodes with a mean of at least 475, every
5,000 env steps, with rlkit's evaluator (the same fresh seeds) for both libraries. Seconds count
from the start of training (for the Ray runs, once the actors are up: their start-up is
recorded as ``startup_seconds``) and include the evaluations. Both one-process runs use one
torch thread. Writes ``benchmarks/results/ppo.json``.

    python -m benchmarks.ppo [--seeds 0,1,2,3,4] [--ray-seeds 0,1,2] [--pendulum-seeds 0,1,2]

Stable-Baselines3 is not one of rlkit's requirements; to compare, install it beside them
(``pip install stable-baselines3==2.9.2``).
"""

from __future__ import annotations

import dataclasses
import statistics
import time

from benchmarks.common import benchmark_parser, seed_list, table, write_result

#: RL Baselines3 Zoo's PPO settings for CartPole-v1 (hyperparams/ppo.yml): 8 envs, 32 steps
#: each, minibatches of 256, 20 epochs, lambda 0.8, gamma 0.98, no entropy bonus, learning
#: rate 1e-3 and clip 0.2 both decayed linearly to 0 over 100k env steps.
SB3_ZOO = {"n_envs": 8, "n_steps": 32, "batch_size": 256, "gae_lambda": 0.8, "gamma": 0.98,
           "n_epochs": 20, "ent_coef": 0.0, "learning_rate": "lin_1e-3", "clip_range": "lin_0.2",
           "n_timesteps": 100_000}


def run_sb3(seed: int, eval_every: int, eval_episodes: int, target: float) -> dict | None:
    """One Stable-Baselines3 PPO run with :data:`SB3_ZOO`, stopped at the first greedy
    evaluation reaching ``target``; None if it is not installed."""
    try:
        from stable_baselines3 import PPO
        from stable_baselines3.common.callbacks import BaseCallback
        from stable_baselines3.common.env_util import make_vec_env
    except ImportError:
        return None
    import torch

    from rlkit.core.common import eval_seed
    from rlkit.envs.evaluation import evaluate_policy

    torch.set_num_threads(1)
    evals: list[tuple[int, float, float]] = []

    class Evaluate(BaseCallback):
        def _on_training_start(self) -> None:
            self.start = time.perf_counter()

        def _on_step(self) -> bool:
            if self.num_timesteps < (len(evals) + 1) * eval_every:
                return True
            returns = evaluate_policy(lambda obs: self.model.predict(obs, deterministic=True)[0],
                                      "CartPole-v1", eval_episodes,
                                      eval_seed(seed, len(evals), eval_episodes))
            evals.append((self.num_timesteps, time.perf_counter() - self.start,
                          float(returns.mean())))
            return evals[-1][2] < target

    env = make_vec_env("CartPole-v1", n_envs=SB3_ZOO["n_envs"], seed=seed)
    model = PPO("MlpPolicy", env, n_steps=32, batch_size=256, gae_lambda=0.8, gamma=0.98,
                n_epochs=20, ent_coef=0.0, learning_rate=lambda left: 1e-3 * left,
                clip_range=lambda left: 0.2 * left, seed=seed, device="cpu", verbose=0)
    model.learn(SB3_ZOO["n_timesteps"], callback=Evaluate())
    env.close()
    steps, seconds, last = evals[-1]
    solved = last >= target
    return {"solved": solved, "eval_return": last, "steps_to_solve": steps if solved else None,
            "seconds_to_solve": seconds if solved else None,
            "eval_steps": [e[0] for e in evals], "eval_returns": [e[2] for e in evals]}


def record(result) -> dict:
    """The per-seed entry of an rlkit run."""
    h, solved = result.history, result.solved
    return {"solved": solved, "eval_return": result.eval_return,
            "steps_to_solve": h.eval_steps[-1] if solved else None,
            "seconds_to_solve": h.eval_seconds[-1] if solved else None,
            "startup_seconds": result.startup_seconds, "updates": result.updates,
            "mean_policy_lag": result.mean_policy_lag, "eval_steps": h.eval_steps,
            "eval_returns": h.eval_returns}


def summarize(by_seed: dict[str, dict]) -> dict:
    """Seeds run and solved; medians and ranges over the solved ones (None if none)."""
    solved = [v for v in by_seed.values() if v["solved"]]
    steps = [v["steps_to_solve"] for v in solved]
    seconds = [v["seconds_to_solve"] for v in solved]
    return {"solved": len(solved), "seeds": len(by_seed),
            "median_steps_to_solve": statistics.median(steps) if solved else None,
            "range_steps_to_solve": [min(steps), max(steps)] if solved else None,
            "median_seconds_to_solve": statistics.median(seconds) if solved else None,
            "range_seconds_to_solve": [min(seconds), max(seconds)] if solved else None}


LABELS = {"ppo_1_process": "rlkit PPO, one process", "sb3_ppo_zoo": "Stable-Baselines3 PPO (Zoo "
          "settings), one process", "ppo_ray": "rlkit PPO on Ray (synchronous)",
          "appo_ray": "rlkit APPO on Ray (asynchronous, V-trace)",
          "pendulum_1_process": "rlkit PPO on Pendulum-v1 (Gaussian policy), one process"}


def readme_lines(data: dict) -> list[str]:
    """The README's block for ``benchmarks/results/ppo.json``."""
    lines = ["**PPO and APPO** (`python -m benchmarks.ppo`; CartPole-v1: greedy evaluation of "
             "20 episodes every 5,000 env steps, solved at a mean of 475; Pendulum-v1: "
             "deterministic evaluation of 10 episodes every 10,000 env steps, solved at -200; "
             "seconds from the start of training, evaluations included; Ray runs: after actor "
             "start-up)", ""]
    rows = []
    for key, s in data["summary"].items():
        if not s["solved"]:
            rows.append((LABELS[key], f"0/{s['seeds']}", "-", "-"))
            continue
        lo, hi = s["range_steps_to_solve"]
        slo, shi = s["range_seconds_to_solve"]
        rows.append((LABELS[key], f"{s['solved']}/{s['seeds']}",
                     f"{s['median_steps_to_solve']:,.0f} ({lo:,}-{hi:,})",
                     f"{s['median_seconds_to_solve']:.1f} ({slo:.1f}-{shi:.1f})"))
    return lines + table(("run", "solved", "median env steps (range)",
                          "median seconds (range)"), rows) + [""]


def main() -> None:
    parser = benchmark_parser(__doc__, "0,1,2,3,4", "one-process runs")
    parser.add_argument("--ray-seeds", type=seed_list, default="0,1,2", help="PPO on Ray and APPO")
    parser.add_argument("--pendulum-seeds", type=seed_list,
                        default="0,1,2", help="PPO on Pendulum-v1")
    args = parser.parse_args()

    from rlkit.algos.ppo import PENDULUM, PPOConfig
    from rlkit.core.common import config_dict
    from rlkit.train.ppo import train_ppo

    config = PPOConfig()
    runs: dict[str, dict[str, dict]] = {"ppo_1_process": {}, "sb3_ppo_zoo": {}}
    for seed in args.seeds:  # interleaved, seed by seed
        runs["ppo_1_process"][str(seed)] = record(train_ppo(dataclasses.replace(config,
                                                                                seed=seed)))
        sb3 = run_sb3(seed, config.eval_every, config.eval_episodes, config.target_return)
        if sb3 is not None:
            runs["sb3_ppo_zoo"][str(seed)] = sb3
        print(seed, {k: {x: v[str(seed)][x] for x in ("steps_to_solve", "seconds_to_solve")}
                     for k, v in runs.items() if str(seed) in v}, flush=True)
    if args.ray_seeds:
        import ray

        from rlkit.distributed.impala.driver import train_appo_ray, train_ppo_ray
        from rlkit.distributed.runtime.cluster import init_ray

        appo = dataclasses.replace(config, synchronous=False, use_vtrace=True)
        runs["ppo_ray"], runs["appo_ray"] = {}, {}
        init_ray()
        try:
            for seed in args.ray_seeds:
                runs["ppo_ray"][str(seed)] = record(train_ppo_ray(
                    dataclasses.replace(config, seed=seed)))
                runs["appo_ray"][str(seed)] = record(train_appo_ray(
                    dataclasses.replace(appo, seed=seed)))
                print(seed, {k: runs[k][str(seed)]["seconds_to_solve"]
                             for k in ("ppo_ray", "appo_ray")}, flush=True)
        finally:
            ray.shutdown()
        appo_config = config_dict(appo)
    else:
        appo_config = None
    if args.pendulum_seeds:
        runs["pendulum_1_process"] = {}
        for seed in args.pendulum_seeds:
            runs["pendulum_1_process"][str(seed)] = record(train_ppo(
                dataclasses.replace(PENDULUM, seed=seed)))
            print("pendulum", seed, runs["pendulum_1_process"][str(seed)]["seconds_to_solve"],
                  flush=True)
    summary = {key: summarize(by_seed) for key, by_seed in runs.items() if by_seed}
    for key, s in summary.items():
        print(key, s)
    write_result("ppo", {"summary": summary, "runs": runs, "config": config_dict(config),
                         "appo_config": appo_config, "pendulum_config": config_dict(PENDULUM),
                         "sb3_zoo": SB3_ZOO, "torch_threads": 1})


if __name__ == "__main__":
    main()
