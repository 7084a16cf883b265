"""One wing per paper: the code that exists only to reproduce a paper's tables and figures.

- ``roma_lab.papers.roma``: ROMA (Tables 1-8: the controller studies, the benchmark tables, GEPA+).
- ``roma_lab.papers.routing``: compositional meta-routing (every table of the benchmark paper).
- ``roma_lab.papers.oagents``: OAgents (the design-choice studies and the robust protocol).

The mechanism rooms below (controller, agents, router, optimizer, bench, stats, results, lm,
experiments, widgets) know no paper: a wing imports their public names, never the other way round.
Notebooks import a wing (and widgets).
"""
