"""What every distributed pattern runs on: the cluster and its resource plan, the
supervisor, the parameter server, the one driver skeleton and its options."""
