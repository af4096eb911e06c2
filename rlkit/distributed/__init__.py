"""Ray versions of the series' algorithms: ``runtime/`` (the cluster, the supervisor, the
parameter server, the one driver skeleton every pattern fills in) and one package per pattern,
each ``roles.py`` + ``driver.py``: ``off_policy/``, ``apex/``, ``a3c/``, ``impala/``.

Every driver is importable from here and called the same way,
``train_<pattern>_ray(config, **options)`` (``from rlkit.distributed import train_dqn_ray``),
as are ``init_ray`` and the run options; each is imported from its module on first use."""

from rlkit.core.exports import lazy_exports

EXPORTS, __getattr__, __dir__ = lazy_exports(__name__, {
    "runtime.cluster": ("init_ray",), "runtime.options": ("RunOptions",),
    "off_policy.driver": ("train_dqn_ray", "train_sac_ray", "train_ray"),
    "off_policy.options": ("OffPolicyOptions", "OffPolicyResult"),
    "apex.driver": ("train_apex_ray", "ApexResult"),
    "a3c.driver": ("train_a3c_ray", "train_a2c_ray", "train_a2c", "A3CResult"),
    "impala.driver": ("train_impala_ray", "train_ppo_ray", "train_appo_ray", "IMPALAOptions")})
__all__ = sorted(EXPORTS)
