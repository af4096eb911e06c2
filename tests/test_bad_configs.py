"""The catalogue of hostile settings, config by config: for every field of every config and of
the drivers' options, values of the wrong kind (a string where a number is meant, a bool where
a number is meant, a string where a bool is meant, NaN, infinity, out of range) are refused on
construction, in this process, with a ``ValueError`` that names the field as written and says
``Fix:``. No Ray here; the driver arguments that need a cluster are in test_bad_inputs.py.

The hostile values are derived from each field's declared rule, and a separate test checks
that every field *has* a rule, so a field added without one fails here rather than being
silently skipped.
"""

import dataclasses
import math
import re
import warnings

import pytest

from rlkit.algos.a2c import A2CConfig
from rlkit.algos.apex import ApexConfig, ApexDQN
from rlkit.algos.ddpg import DDPGConfig
from rlkit.algos.dqn import DQNConfig
from rlkit.algos.impala import IMPALAConfig
from rlkit.algos.ppo import PPOConfig
from rlkit.algos.sac import SACConfig
from rlkit.core.validation import RULE, Rule
from rlkit.distributed.off_policy.options import OffPolicyOptions
from rlkit.distributed.runtime.options import RunOptions

CONFIGS = [DQNConfig, SACConfig, DDPGConfig, A2CConfig, IMPALAConfig, PPOConfig, ApexConfig,
           RunOptions, OffPolicyOptions]


def hostile_values(rule: Rule) -> list:
    """Values ``rule`` must refuse: the wrong kinds first, then the edges of its range."""
    if rule.kind == "int":
        bad = ["3", True, 2.5, None if not rule.optional else "x"]
        if rule.low is not None:
            bad.append(int(rule.low) - 1)
        if rule.high is not None:
            bad.append(int(rule.high) + 1)
        return bad
    if rule.kind == "number":
        bad = ["0.5", True, math.nan]
        bad += [math.inf] if rule.finite else []
        bad += [] if rule.optional else [None]
        if rule.low is not None:
            bad.append(rule.low if rule.low_open else rule.low - 1)
        if rule.high is not None:
            bad.append(rule.high if rule.high_open else rule.high + 1)
        return bad
    return {"flag": ["false", 1, None], "text": ["", 3, None],
            "layers": [(), (64, 0), (64.0,), "64", (True,)], "path": [3, ""],
            "env ids": ["CartPole-v1", [3, None], [""], {"worker 0": "CartPole-v1"}],
            "role steps": [[("worker 0", 5)], {"worker 0": -1}, {"worker 0": 2.5}, {3: 5}]
            }[rule.kind]


CASES = [pytest.param(cls, f.name, value, id=f"{cls.__name__}.{f.name}={value!r}")
         for cls in CONFIGS for f in dataclasses.fields(cls) if RULE in f.metadata
         for value in hostile_values(f.metadata[RULE])]


def test_the_catalogue_is_large_and_every_field_declares_its_rule():
    missing = [f"{cls.__name__}.{f.name}" for cls in CONFIGS for f in dataclasses.fields(cls)
               if RULE not in f.metadata]
    assert missing == []
    assert len(CASES) >= 400


@pytest.mark.parametrize("cls, name, value", CASES)
def test_a_hostile_value_is_refused_naming_the_field_and_the_fix(cls, name, value):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # IMPALA's staleness warning is not the point here
        with pytest.raises(ValueError, match=rf"^{re.escape(name)}=.*\. Fix: \S"):
            cls(**{name: value})


def test_the_defaults_and_their_numpy_twins_are_accepted_as_plain_python(tmp_path):
    """The rules refuse the wrong kinds, not the right values in another costume; and what
    they accept is stored as plain Python, so a checkpoint of it loads again (a numpy scalar
    in a config made ``torch.load(weights_only=True)`` refuse the file)."""
    from fractions import Fraction

    import numpy as np

    from rlkit.algos.dqn import DQNLearner
    from rlkit.core.metrics import History
    from rlkit.train.checkpoint import load_checkpoint, save_checkpoint

    for cls in CONFIGS:
        cls()
    config = DQNConfig(batch_size=np.int64(32), gamma=np.float32(0.5), hidden=[np.int32(8)],
                       double_dqn=np.bool_(False), learning_rate=Fraction(1, 1000))
    assert (config.batch_size, config.gamma, config.hidden, config.double_dqn,
            config.learning_rate) == (32, 0.5, (8,), False, 0.001)
    assert [type(v) for v in (config.batch_size, config.gamma, config.double_dqn,
                              config.learning_rate)] == [int, float, bool, float]
    save_checkpoint(tmp_path, "DQN", config, DQNLearner(4, 2, config).state_dict(), None, 0,
                    0.0, History())
    assert load_checkpoint(tmp_path, "DQN", config).config["batch_size"] == 32
    assert DQNConfig(max_grad_norm=math.inf).max_grad_norm == math.inf  # no clipping


@pytest.mark.parametrize("cls, key, near", [(DQNConfig, "gama", "gamma"),
                                            (IMPALAConfig, "num_actors", "num_workers"),
                                            (OffPolicyOptions, "timeout", "timeout_s")])
def test_a_misspelt_setting_is_named_with_its_closest_match(cls, key, near):
    with pytest.raises(TypeError, match=rf"{cls.__name__} got an unknown setting '{key}'. Fix: "
                                        rf"did you mean '{near}'\?"):
        cls(**{key: 1})


# the rules between fields, and the cases the outside probe found (issue 24)
CROSS = [
    (lambda: DQNConfig(epsilon_start=0.1, epsilon_end=0.2), r"epsilon_end=0.2 is above "
     r"epsilon_start=0.1. Fix:"),
    (lambda: DQNConfig(buffer_size=32, batch_size=64, learning_starts=64),
     r"batch_size=64 is larger than buffer_size=32. Fix:"),
    (lambda: SACConfig(learning_starts=10), r"learning_starts=10 is smaller than batch_size"),
    (lambda: DDPGConfig(total_steps=500), r"learning_starts=1000 is not below total_steps"),
    (lambda: IMPALAConfig(c_bar=2.0), r"rho_bar=1.0 is below c_bar=2.0.*Fix:"),
    (lambda: IMPALAConfig(queue_size=4), r"queue_size=4 is below batch_fragments=8.*Fix:"),
    (lambda: IMPALAConfig(synchronous=True, num_workers=3),
     r"batch_fragments=8 is not a multiple of num_workers=3.*Fix:"),
    (lambda: IMPALAConfig(queue_size=10**6), r"queue_size=1000000 holds 125000 updates' worth"
     r".*Fix: keep queue_size <= 8 \* batch_fragments = 64"),
    (lambda: ApexConfig(sigma_min=0.6), r"sigma_min=0.6 is above sigma_max=0.5. Fix:"),
    (lambda: DQNConfig(envs_per_worker=4, fragment_steps=30), r"fragment_steps=30 is not a "
     r"multiple of envs_per_worker=4. Fix: use 28"),
    (lambda: ApexDQN(DQNConfig(), ApexConfig(num_shards=3)), r"num_shards=3 exceeds "
     r"DQNConfig.num_workers=2. Fix:"),
    (lambda: A2CConfig(env_id="CartPole-v9"), r"env_id='CartPole-v9' is not a registered"),
    (lambda: IMPALAConfig(env_id="nope:Thing-v0"), r"env_id='nope:Thing-v0'.*Fix:"),
    (lambda: A2CConfig(gamma="0.99"), r"gamma='0.99' must be a finite number in \[0, 1\) "
     r"\(got a str\)"),
    (lambda: A2CConfig(learning_rate=True), r"learning_rate=True .*\(got a bool\)"),
    (lambda: IMPALAConfig(use_vtrace="false"), r"use_vtrace='false' must be True or False"),
    (lambda: ApexConfig(eps_spread=-10), r"eps_spread=-10 must be a finite number in \[0, 50\]"),
    (lambda: ApexConfig(sigma_max=math.inf), r"sigma_max=inf must be a finite number"),
    (lambda: SACConfig(target_return=math.nan), r"target_return=nan must be a finite number "
     r"or None"),
    (lambda: OffPolicyOptions(checkpoint_every=0), r"checkpoint_every=0 must be an int >= 1"),
    (lambda: RunOptions(checkpoint_every=5), r"checkpoint_every=5 says how often to save, but "
     r"checkpoint_dir is not set.*Fix:"),
]


@pytest.mark.parametrize("make, pattern", CROSS, ids=[p[:40] for _, p in CROSS])
def test_rules_between_fields_and_the_probes_cases(make, pattern):
    with pytest.raises(ValueError, match=pattern):
        make()


def test_a_long_queue_is_warned_about_before_it_is_refused():
    with pytest.warns(UserWarning, match=r"queue_size=200 holds 25 updates' worth.*Fix:"):
        IMPALAConfig(queue_size=200)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        IMPALAConfig(queue_size=64)  # 8 updates' worth: at the limit, no warning


def test_apex_refuses_a_second_n_step_and_the_wrong_config_types():
    from rlkit.algos.apex import ApexDDPG, ApexDQN

    with pytest.raises(ValueError, match=r"DQNConfig.n_step=5 conflicts with ApexConfig.n_step="
                                         r"3.*Fix: set ApexConfig\(n_step=5\)"):
        ApexDQN(DQNConfig(n_step=5))
    assert ApexDQN(DQNConfig(n_step=3), ApexConfig(n_step=3)).apex.n_step == 3
    with pytest.raises(TypeError, match=r"ApexDDPG takes a DDPGConfig as its config, got "
                                        r"DQNConfig. Fix:"):
        ApexDDPG(DQNConfig())
    with pytest.raises(TypeError, match=r"takes an ApexConfig as apex, got dict"):
        ApexDQN(DQNConfig(), {"n_step": 3})
