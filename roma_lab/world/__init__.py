"""The generated world of the agent benchmark: a seeded fictional world (towns, people, organisations),
its documents and ledger files, three levels of tasks with gold answers derived by code, and the
scripted reader ``solve`` that answers every task from tool observations alone (so the evidence is
shown to suffice). ``roma_lab.agents.world_tasks`` makes agent tasks of it, with its tools; knows no
paper. See design/world_benchmark.md.
"""

from ._world import (DEFAULT_WORLD_SEED, LEVELS, RELATION_SYNONYMS, TEMPLATES, WORLD_BENCHMARK, WORLD_SPLITS, Fact,
                     World, WorldTask, generate_world, read_facts, solve, world_tasks_of)

__all__ = ["DEFAULT_WORLD_SEED", "LEVELS", "RELATION_SYNONYMS", "TEMPLATES", "WORLD_BENCHMARK", "WORLD_SPLITS", "Fact",
           "World", "WorldTask", "generate_world", "read_facts", "solve", "world_tasks_of"]
