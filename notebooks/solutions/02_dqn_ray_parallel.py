"""Solutions to notebook 02's coding exercises."""


def my_updates_due(env_steps, learning_starts, train_every):
    """Updates the single process has done after ``env_steps`` steps: one at every multiple of
    ``train_every`` past ``learning_starts``."""
    return max(0, env_steps // train_every - learning_starts // train_every)


def updates_per_fragment(fragment_sizes, learning_starts, train_every):
    """How many updates the driver asks the learner for after each fragment arrives."""
    asked, steps, out = 0, 0, []
    for size in fragment_sizes:
        steps += size
        due = my_updates_due(steps, learning_starts, train_every)
        out.append(due - asked)
        asked = due
    return out
