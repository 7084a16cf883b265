"""A simulated OpenAI-compatible provider on loopback: models of planted skill answering the tasks of a
task file, with a provider's latency, faults and prices, the same answers for the same seed.

``simulated_provider(tasks, models, seed=..., latency=SimLatency(...), faults=SimFaults(...))`` serves
them on 127.0.0.1 while a ``with`` block runs; name its ``base_url`` in ``$ROMA_LAB_API_BASE`` and
call ``resolve_lm("openai/<model>")`` as a user's run would. ``SimulatedWorld`` gives the same answers
without a server (``_world.py``: the outcome rule); ``SimulatedProvider`` is the server
(``_provider.py``). From the shell: ``python -m roma_lab.simulator TASKS --model NAME=SKILL ...``.
For tests, benchmarks and teaching that need a provider at scale without a model. See
design/simulated_provider.md.
"""

from ._provider import SimCall, SimulatedProvider, simulated_provider
from ._world import SimFaults, SimLatency, SimModel, SimulatedWorld

__all__ = [
    "SimCall",
    "SimFaults",
    "SimLatency",
    "SimModel",
    "SimulatedProvider",
    "SimulatedWorld",
    "simulated_provider",
]
