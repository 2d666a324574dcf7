"""Plots (matplotlib, Agg) and the HTML/Markdown report of a reduce; no Spark here.

``render.render_report`` writes leaderboard.md, the PNGs and a self-contained
report.html from plain rows, so `rbench report` can re-render without a JVM. The plots:
``plot_style`` (what every plot shares), ``step_plots``, ``timeline_plots``, ``fault_plots``,
``search_plots``, ``broker_plots``; the page: ``figures`` (how a figure is printed),
``verdict_text``, ``leaderboard_md``, ``sections``, ``html_parts``.
"""
