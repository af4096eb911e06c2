"""IMPALA (notebook 06): workers, the bounded queue, the V-trace learner, the driver."""
