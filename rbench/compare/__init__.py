"""`rbench compare`: the same workload on two or more clusters, in interleaved rounds, as ratios with intervals.

``rounds`` runs them (balanced order, each round one full run per cluster through the run sequence),
``metrics`` says what is compared and which way is better, ``stats`` the paired ratio and its t
interval, ``result`` the typed result and compare.json/md, ``page`` compare.html; docs/compare.md.
"""
