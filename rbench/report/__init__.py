"""Plots (matplotlib, Agg) and the HTML/Markdown report of a reduce; no Spark here.

``render.render_report`` writes leaderboard.md, the PNGs and a self-contained
report.html from plain rows, so `rbench report` can re-render without a JVM.
"""
