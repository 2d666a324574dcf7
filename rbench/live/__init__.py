"""Approximate figures while a run runs, on both sides: the task → coordinator progress channel,
mergeable log-bucket histograms, and the Prometheus endpoints. Exact figures come from the reduce."""
