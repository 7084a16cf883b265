"""A scripted DSPy 3.4 LM engine shared by the optimizer tests (offline, deterministic).

It answers ``respond(model, inputs, output_names, system)`` as a function of the request alone, never
of call order, so results do not depend on thread scheduling; every request is logged in ``calls``
(parsed) and in ``requests`` (model, temperature, system prompt and message texts, as sent), so a
test can tell whether two runs sent exactly the same requests.
"""

import json
import re
import threading

from dspy.lm15 import Message, Response, TextPart, Usage

_FIELD = re.compile(r"\[\[ ## (\w+) ## \]\]\n(.*?)(?=\n\n\[\[ ## |\n\nRespond|\Z)", re.DOTALL)


class ScriptedEngine:
    def __init__(self, respond):
        self.respond = respond
        self.calls: list[tuple[str, float | None, tuple[str, ...], dict]] = []  # model, temperature, outputs, inputs
        self.requests: list[tuple[str, float | None, str, tuple[str, ...]]] = []  # model, temperature, system, texts
        self._lock = threading.Lock()

    def complete(self, request):
        system = request.system if isinstance(request.system, str) else "".join(p.text for p in request.system)
        inputs = dict(_FIELD.findall(request.messages[-1].text or ""))
        outputs = tuple(re.findall(r"^\d+\. `(\w+)`", system.split("Your output fields are:")[1], re.MULTILINE))
        values = self.respond(request.model, inputs, outputs, system)
        with self._lock:
            self.calls.append((request.model, request.config.temperature, outputs, inputs))
            self.requests.append((request.model, request.config.temperature, system,
                                  tuple(m.text or "" for m in request.messages)))
        if "Outputs will be a JSON object" in system:
            text = json.dumps(values)
        else:
            text = "".join(f"[[ ## {k} ## ]]\n{v}\n\n" for k, v in values.items()) + "[[ ## completed ## ]]"
        return Response(id=None, model=request.model, message=Message.assistant([TextPart(text)]),
                        finish_reason="stop", usage=Usage(input_tokens=0, output_tokens=0, total_tokens=0))

    def stream(self, request):
        raise NotImplementedError

    def close(self):
        pass
