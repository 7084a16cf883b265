"""roma_lab: run, inspect, ablate and reproduce recursive multi-agent systems.

Subpackages, one per role (import the one you need; `import roma_lab` stays light), from the ground up:
``stats`` (bootstrap statistics), ``results`` (tidy tables, provenance, file names), ``lm`` (model
naming, the embedded default, the metered call), ``trace`` (the one trace vocabulary: runs, nodes,
model and tool calls), ``tools`` (the code jail, retrieval, MCP, the artifact store), ``router``
(compositional meta-routing), ``controller`` (the ROMA loop), ``cluster`` (runs on a Dask cluster),
``bench`` (benchmark data, graders and the item runner), ``experiments`` (papermill batch runner),
``agents`` (the tool-using agent), ``optimizer`` (GEPA+), ``widgets`` (Jupyter views) and
``evaluate`` (any systems on any tasks, one tidy row per task and run). Above them, ``papers``
holds one wing per reproduced paper (``roma``, ``routing``, ``oagents``).
"""

import os

# LiteLLM (under DSPy) otherwise downloads its model price list when first imported: ~7 s of retries
# and warnings naming an external host in every fresh process offline. Its own copy of the list, as
# installed, is the one roma_lab prices calls with (lm/_price.py). A user's explicit setting wins.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

__version__ = "0.1.0"
__all__ = ["__version__"]
