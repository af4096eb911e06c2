"""What the notebooks show: source listings, plots, the progress bar, rendered episodes,
exercise checks."""
