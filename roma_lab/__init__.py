"""roma_lab: run, inspect, ablate and reproduce recursive multi-agent systems.

Subpackages, one per role (import the one you need; `import roma_lab` stays light):
``controller`` (ROMA loop), ``optimizer`` (GEPA+), ``router`` (compositional meta-routing),
``stats`` (bootstrap statistics), ``lm`` (model naming and the embedded default),
``bench`` (benchmark data and graders), ``widgets`` (Jupyter views),
``experiments`` (papermill batch runner), ``results`` (tidy tables and provenance).
"""

__version__ = "0.1.0"
__all__ = ["__version__"]
