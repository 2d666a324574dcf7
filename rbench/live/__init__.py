"""Approximate figures while a run runs, on both sides: the task → coordinator progress channel,
mergeable log-bucket histograms, and the Prometheus endpoints. Exact figures come from the reduce."""

# How often a live server's serve_forever loop looks for shutdown(): the default 0.5 s was paid
# at every task's and every run's way out (the control server and each /metrics server), for
# nothing; 20 ms costs one wake-up per server per 20 ms while a run lasts.
SHUTDOWN_POLL_S = 0.02
