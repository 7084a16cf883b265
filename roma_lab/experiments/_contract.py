"""The notebook contract: what every numbered notebook and its spec must satisfy.

Checked by tests/test_notebooks.py over the real repository; returning a list of problems
(rather than raising at the first) lets one test run report everything at once.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

from roma_lab.results import read_regular_bytes

from ._spec import NOTEBOOK_NAME, REQUIRED_PARAMETERS, SpecError, declared_parameters, load_spec, parse_literal

#: What every notebook's introduction names for its planned time (issue 52): the plan, on this machine.
PLAN_COMMAND = "python -m roma_lab.experiments plan {stem}"
# Expected type of each runner-facing parameter's default.
_PARAMETER_TYPES = {"OUT_DIR": str, "SEED": int, "LM": str}
_NO_LOGIC = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


def _source(cell: dict) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def notebook_problems(path: str | Path) -> list[str]:
    """Contract problems of one notebook file (empty when it is fine)."""
    path = Path(path)
    try:
        nb = json.loads(read_regular_bytes(path))
        cells = nb["cells"]
    except (OSError, ValueError, KeyError, RecursionError) as exc:  # RecursionError: JSON nested too deep
        return [f"{path.name}: not a readable notebook ({exc})"]
    problems = []
    if nb.get("metadata", {}).get("kernelspec", {}).get("name") != "python3":
        problems.append("metadata.kernelspec.name must be 'python3'")
    if nb.get("metadata", {}).get("kernelspec", {}).get("display_name") != "Python 3 (ipykernel)":
        # what JupyterLab writes on opening it: any other name makes the executed copy dirty at once
        problems.append("metadata.kernelspec.display_name must be 'Python 3 (ipykernel)'")
    if not cells or cells[0].get("cell_type") != "markdown" or not _source(cells[0]).lstrip().startswith("#"):
        problems.append("the first cell must be a markdown header naming the paper artefact")
    tagged = [c for c in cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    if len(tagged) != 1:
        problems.append(f"exactly one cell must be tagged 'parameters' (found {len(tagged)})")
    for i, cell in enumerate(cells):
        if cell.get("cell_type") != "code":
            continue
        if cell.get("outputs") or cell.get("execution_count") is not None:
            problems.append(f"cell {i} has stored outputs; commit notebooks without outputs")
        # IPython magics and shell escapes are not Python; the rest must parse.
        code = "\n".join(line for line in _source(cell).splitlines() if not line.lstrip().startswith(("%", "!")))
        try:
            tree = ast.parse(code)
        except SyntaxError as exc:
            problems.append(f"cell {i} is not valid Python: {exc.msg} (line {exc.lineno})")
            continue
        if any(isinstance(node, _NO_LOGIC) for node in ast.walk(tree)):
            problems.append(f"cell {i} defines a function, class or lambda; move logic into roma_lab")
    if len(tagged) == 1:
        try:
            declared = declared_parameters(path)
        except SpecError as exc:
            return [*problems, str(exc)]
        problems += [f"the parameters cell must declare {name}" for name in REQUIRED_PARAMETERS if name not in declared]
        for name, default in declared.items():
            try:
                value = parse_literal(default)
            except ValueError:
                problems.append(f"parameter {name} = {default} is not a plain literal")
                continue
            expected = _PARAMETER_TYPES.get(name)
            if expected is not None and type(value) is not expected:
                problems.append(f"parameter {name} must default to {expected.__name__}, got {default}")
        if "LM" in declared and declared["LM"].strip("'\"") != "local":
            problems.append(f"parameter LM must default to \"local\", got {declared['LM']}")
    return [f"{path.name}: {p}" for p in problems]


def contract_problems(root: str | Path) -> list[str]:
    """Every contract problem in a project: notebook/spec pairing, spec validity, notebook rules."""
    root = Path(root)
    problems = []
    notebooks = sorted(p for p in (root / "notebooks").glob("*.ipynb") if p.is_file())
    spec_paths = {p.stem: p for p in sorted((root / "experiments").glob("*.toml"))}
    for nb in notebooks:
        if not NOTEBOOK_NAME.match(nb.name):
            problems.append(f"{nb.name}: notebook names must match {NOTEBOOK_NAME.pattern}")
        elif nb.stem not in spec_paths:
            problems.append(f"{nb.name}: no spec experiments/{nb.stem}.toml")
        problems += notebook_problems(nb)
    for stem, spec_path in spec_paths.items():
        try:
            spec = load_spec(spec_path)
        except SpecError as exc:
            problems.append(str(exc))
            continue
        header = ""
        cells = json.loads(read_regular_bytes(spec.notebook)).get("cells", [])
        if cells and cells[0].get("cell_type") == "markdown":
            header = _source(cells[0])
        if spec.table not in header:
            problems.append(f"{spec.notebook.name}: the markdown header must name the artefact {spec.table!r}")
        if PLAN_COMMAND.format(stem=stem) not in header:  # a time typed into the text goes stale; the plan's does not
            problems.append(f"{spec.notebook.name}: the introduction must name the command that plans its time: "
                            f"`{PLAN_COMMAND.format(stem=stem)}`")
    return problems
