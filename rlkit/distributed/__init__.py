"""Ray versions of the series' algorithms: ``runtime/`` (the cluster, the supervisor, the
parameter server, the one driver skeleton every pattern fills in) and one package per pattern,
each ``roles.py`` + ``driver.py``: ``off_policy/``, ``apex/``, ``a3c/``, ``impala/``."""
