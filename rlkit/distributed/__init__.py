"""Ray versions of the series' algorithms: the cluster, the roles, their supervisor, and one
short driver per pattern (off-policy replay in :mod:`rlkit.distributed.off_policy.driver`)."""
