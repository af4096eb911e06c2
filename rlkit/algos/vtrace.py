"""V-trace (Espeholt et al., 2018): off-policy value targets and policy-gradient advantages
for trajectories collected by a policy that lags behind the learner's.

Everything here is time-major: a tensor of shape ``(T, B)`` holds ``T`` consecutive steps of
``B`` trajectories. Episode boundaries inside a trajectory are marked per step:

* a **termination** at step ``t`` (the episode truly ended) is a zero in ``discounts[t]``: no
  value is bootstrapped past it;
* a **truncation** at step ``t`` (a time limit cut the episode) cuts the trace as well (the next
  row belongs to another episode), but the step still bootstraps, from ``final_values[t]``,
  the value of the real last observation, not of the next episode's first state;
* the **last step** of a trajectory bootstraps from ``bootstrap_value``, ``V(x_T)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

import torch


class VTraceReturns(NamedTuple):
    """What :func:`vtrace` returns.

    Attributes:
        vs: ``(T, B)`` value targets ``v_s``.
        pg_advantages: ``(T, B)`` policy-gradient advantages
            ``rho_s * (r_s + gamma_s * v_{s+1} - V(x_s))`` with ``rho_s = min(rho_bar, pi/mu)``.
        clipped_rhos: ``(T, B)`` ``rho_s``, for logging.
        advantages: ``(T, B)`` ``r_s + gamma_s * v_{s+1} - V(x_s)``, the advantage before the
            importance weight (APPO's surrogate applies its own ratio to it).
    """

    vs: torch.Tensor
    pg_advantages: torch.Tensor
    clipped_rhos: torch.Tensor
    advantages: torch.Tensor


def check_time_major(owner: str, shapes: Mapping[str, tuple[int, ...]], last: str) -> None:
    """Refuse inputs that are not one time-major grid: the first of ``shapes`` must be
    ``(T, B)`` with ``T >= 1``, every other the same, except ``last`` (the values after the last
    step), which must be ``(B,)``. The error names the input, the shape it must have, and ``owner``.
    """
    (first, reference), *_ = shapes.items()
    if len(reference) != 2 or reference[0] < 1:
        raise ValueError(f"{first} has shape {tuple(reference)}, but {owner} needs time-major "
                         f"(T, B) inputs with T >= 1. Fix: pass at least one step, shaped "
                         f"(steps, trajectories).")
    for name, shape in shapes.items():
        want = tuple(reference[1:] if name == last else reference)
        if tuple(shape) != want:
            raise ValueError(f"{name} has shape {tuple(shape)}, but {first} has "
                             f"{tuple(reference)}, so {name} must be {want}. Fix: pass every "
                             f"per-step input time-major (T, B) and {last} as (B,).")


def check_vtrace_inputs(shapes: dict[str, tuple[int, ...]], rho_bar: float,
                        c_bar: float) -> None:
    """Raise ``ValueError`` naming the field and the fix for bad V-trace inputs.

    Args:
        shapes: Field name -> shape; every field must be ``(T, B)`` except ``bootstrap_value``,
            which must be ``(B,)``.
        rho_bar, c_bar: The truncation levels; ``rho_bar >= c_bar >= 0`` is required.
    """
    if not (0 <= c_bar <= rho_bar):
        raise ValueError(f"rho_bar={rho_bar} and c_bar={c_bar}: V-trace needs "
                         f"rho_bar >= c_bar >= 0 (rho_bar sets which value function it converges "
                         f"to, c_bar only how fast). Fix: raise rho_bar to at least c_bar "
                         f"(the paper uses rho_bar = c_bar = 1.0).")
    check_time_major("vtrace", shapes, "bootstrap_value")


def check_finite_inputs(inputs: dict[str, torch.Tensor]) -> None:
    """Raise ``FloatingPointError`` (as a learner does for a non-finite loss) naming every
    input that holds a NaN (or, except for the
    log-probabilities, an infinity): one of them would make every target of its trajectory NaN.

    A log-probability of ``-inf`` is allowed: an action the target policy can no longer take
    gets ``rho = 0``, a finite answer. One host sync for the lot.
    """
    def bad(name: str, value: torch.Tensor) -> torch.Tensor:
        return value.isnan().any() if name.endswith("log_probs") else ~value.isfinite().all()

    flags = torch.stack([bad(name, value) for name, value in inputs.items()])
    if bool(flags.any()):
        names = [name for name, flag in zip(inputs, flags.tolist(), strict=True) if flag]
        raise FloatingPointError(f"{', '.join(names)} hold{'s' * (len(names) == 1)} NaN or "
                         f"infinite values, so V-trace would return NaN targets for the whole "
                         f"trajectory. Fix: find where they became non-finite (a network that "
                         f"diverged: lower the learning rate or clip the gradients; a reward or "
                         f"an observation the env returned as NaN).")


@torch.no_grad()
def vtrace(behaviour_log_probs: torch.Tensor, target_log_probs: torch.Tensor,
           rewards: torch.Tensor, values: torch.Tensor, bootstrap_value: torch.Tensor,
           discounts: torch.Tensor, rho_bar: float = 1.0, c_bar: float = 1.0,
           truncations: torch.Tensor | None = None,
           final_values: torch.Tensor | None = None) -> VTraceReturns:
    """V-trace targets by the backward recursion, vectorised over the ``B`` trajectories.

    With ``rho_t = min(rho_bar, pi(a_t|x_t) / mu(a_t|x_t))``, ``c_t = min(c_bar, pi/mu)`` and
    ``delta_t = rho_t * (r_t + gamma_t * V(x_{t+1}) - V(x_t))``::

        v_s - V(x_s) = delta_s + gamma_s * c_s * (v_{s+1} - V(x_{s+1}))

    with ``v_{s+1} - V(x_{s+1}) = 0`` past the last step and past an episode's end. Here
    ``V(x_{t+1})`` is ``values[t + 1]`` inside an episode, ``final_values[t]`` at a truncation,
    and ``bootstrap_value`` at the last step. With ``pi = mu`` and ``rho_bar, c_bar >= 1`` the
    targets are the n-step returns to the trajectory's end; with ``c_bar = 0`` they are one-step
    TD targets.

    Args:
        behaviour_log_probs: ``(T, B)`` ``log mu(a_t|x_t)`` of the policy that acted.
        target_log_probs: ``(T, B)`` ``log pi(a_t|x_t)`` of the policy being learned.
        rewards: ``(T, B)`` ``r_t``.
        values: ``(T, B)`` ``V(x_t)`` under the learner's value function.
        bootstrap_value: ``(B,)`` ``V(x_T)``, the value after the last step.
        discounts: ``(T, B)`` ``gamma_t``: the discount, 0 where step ``t`` terminated.
        rho_bar: Truncation of the importance weight in ``delta_t`` and the advantages.
        c_bar: Truncation of the trace coefficients ``c_t``; must not exceed ``rho_bar``.
        truncations: ``(T, B)`` 1.0 where a time limit ended the episode at step ``t``
            (default: none).
        final_values: ``(T, B)`` value of the real observation after step ``t``; read only
            where ``truncations`` is 1 (required if any is).

    Returns:
        :class:`VTraceReturns` with ``vs`` and ``pg_advantages``, each ``(T, B)``, carrying no
        gradient.

    Raises:
        TypeError: for an input that is not a tensor.
        ValueError: naming the field and the fix, for mismatched shapes, ``T < 1``, or
            ``rho_bar < c_bar``.
        FloatingPointError: for a NaN input (:func:`check_finite_inputs`).
    """
    inputs = {"behaviour_log_probs": behaviour_log_probs, "target_log_probs": target_log_probs,
              "rewards": rewards, "values": values, "bootstrap_value": bootstrap_value,
              "discounts": discounts}
    if truncations is not None:
        if final_values is None:
            raise ValueError("truncations was given without final_values. Fix: pass "
                             "final_values (T, B), the value of the real observation after "
                             "each step, so a truncated step can bootstrap from it.")
        inputs.update(truncations=truncations, final_values=final_values)
    for name, value in inputs.items():
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"{name} is a {type(value).__name__}, but vtrace takes torch "
                            f"tensors. Fix: pass torch.as_tensor({name}) (time-major (T, B); "
                            f"bootstrap_value (B,)).")
    check_vtrace_inputs({name: value.shape for name, value in inputs.items()}, rho_bar, c_bar)
    check_finite_inputs(inputs)

    ratios = torch.exp(target_log_probs - behaviour_log_probs)
    rhos = ratios.clamp(max=rho_bar)
    cs = ratios.clamp(max=c_bar)
    # V(x_{t+1}) as seen from step t: the next row, the bootstrap value after the last step,
    # and the real final observation's value where a time limit cut the episode
    next_values = torch.cat([values[1:], bootstrap_value.unsqueeze(0)], dim=0)
    carry = torch.ones_like(values)  # 1 where the trace continues into row t + 1
    if truncations is not None:
        cut = truncations > 0
        next_values = torch.where(cut, final_values, next_values)
        carry = (~cut).to(values.dtype)
    deltas = rhos * (rewards + discounts * next_values - values)

    traces = discounts * cs * carry  # gamma_t * c_t, 0 where the trace stops
    acc = torch.zeros_like(bootstrap_value)
    backwards = []  # v_s - V(x_s), from the last step to the first
    for delta, trace in zip(reversed(deltas.unbind(0)), reversed(traces.unbind(0)), strict=True):
        acc = delta + trace * acc
        backwards.append(acc)
    corrections = torch.stack(backwards[::-1])
    vs = values + corrections

    # v_{s+1} for the advantage: the next target inside an episode, else the bootstrap value
    next_vs = torch.cat([vs[1:], bootstrap_value.unsqueeze(0)], dim=0)
    next_vs = torch.where(carry > 0, next_vs, next_values)
    advantages = rewards + discounts * next_vs - values
    return VTraceReturns(vs=vs, pg_advantages=rhos * advantages, clipped_rhos=rhos,
                         advantages=advantages)


@torch.no_grad()
def nstep_returns(rewards: torch.Tensor, values: torch.Tensor, bootstrap_value: torch.Tensor,
                  discounts: torch.Tensor, truncations: torch.Tensor | None = None,
                  final_values: torch.Tensor | None = None) -> VTraceReturns:
    """Plain n-step returns to the trajectory's end, ignoring who acted: V-trace with every
    importance ratio set to 1. This is the "no correction" baseline (A2C/A3C's targets), which
    is biased when the data came from an older policy.

    Args and Returns: as :func:`vtrace`, without the log-probabilities.
    """
    zeros = torch.zeros_like(values)
    return vtrace(zeros, zeros, rewards, values, bootstrap_value, discounts, 1.0, 1.0,
                  truncations, final_values)
