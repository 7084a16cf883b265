"""Issue 44: importing roma_lab (and what its rooms import: DSPy, LiteLLM) in a fresh process makes no
network request. A socket audit hook records every connect and name lookup, and refuses them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

PROBE = r"""
import json, sys
asked = []
def audit(event, args):
    if event in ("socket.connect", "socket.getaddrinfo", "socket.gethostbyname", "socket.sendto"):
        asked.append([event, repr(args)[:200]])
        raise OSError("network refused by the test")
sys.addaudithook(audit)
import roma_lab, roma_lab.lm, roma_lab.evaluate, roma_lab.experiments, roma_lab.controller, roma_lab.agents
import roma_lab.widgets, roma_lab.papers.roma, roma_lab.simulator
import dspy, litellm  # what resolving a model imports
print(json.dumps(asked))
"""


def test_no_import_of_roma_lab_in_a_fresh_process_asks_the_network():
    env = {k: v for k, v in os.environ.items() if not k.startswith("LITELLM_")}  # as a fresh kernel has it
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []
