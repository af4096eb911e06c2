"""Ape-X (notebook 04): workers, replay shards, learner, driver."""
