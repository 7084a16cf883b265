"""roma_lab: run, inspect, ablate and reproduce recursive multi-agent systems.

Subpackages, one per role (import the one you need; `import roma_lab` stays light):
``controller`` (ROMA loop), ``agents`` (the tool-using agent), ``optimizer`` (GEPA+), ``router``
(compositional meta-routing), ``stats`` (bootstrap statistics), ``lm`` (model naming and the embedded
default), ``bench`` (benchmark data and graders), ``widgets`` (Jupyter views), ``experiments``
(papermill batch runner), ``dask`` (runs on a cluster), ``results`` (tidy tables and provenance).
Above them, ``papers`` holds one wing per reproduced paper (``roma``, ``routing``, ``oagents``).
"""

__version__ = "0.1.0"
__all__ = ["__version__"]
