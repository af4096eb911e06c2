"""Ray versions of the series' algorithms: ``runtime/`` (the cluster, the supervisor, the
parameter server, the one driver skeleton every pattern fills in) and one package per pattern,
each ``roles.py`` + ``driver.py``: ``off_policy/``, ``apex/``, ``a3c/``, ``impala/``.

Every driver is importable from here and called the same way,
``train_<pattern>_ray(config, **options)`` (``from rlkit.distributed import train_dqn_ray``),
as are ``init_ray`` and the run options; each is imported from its module on first use."""

from rlkit.core.exports import lazy_exports

EXPORTS = {
    "init_ray": "runtime.cluster", "RunOptions": "runtime.options",
    "train_dqn_ray": "off_policy.driver", "train_sac_ray": "off_policy.driver",
    "train_ray": "off_policy.driver", "OffPolicyOptions": "off_policy.options",
    "OffPolicyResult": "off_policy.options",
    "train_apex_ray": "apex.driver", "ApexResult": "apex.driver",
    "train_a3c_ray": "a3c.driver", "train_a2c_ray": "a3c.driver", "train_a2c": "a3c.driver",
    "A3CResult": "a3c.driver",
    "train_impala_ray": "impala.driver", "train_ppo_ray": "impala.driver",
    "train_appo_ray": "impala.driver",
}
__all__ = sorted(EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, EXPORTS)
