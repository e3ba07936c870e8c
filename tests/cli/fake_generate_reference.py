#!/usr/bin/env python3
"""A stand-in for bench/torch_reference.py's `serve` mode in `cotan bench generate`'s tests (CI
has no torch or transformers): the header, then each "generate" request checked (the model
directory cotan wrote, the prompts, the mode) and answered with fixed times, 0.5 s for a run of
several tokens and 0.1 s for one (mode "compiled": 0.25 s and 0.1 s, and 2 s for the first
request of several tokens, which compiles one graph), the token ids 7, 8, 9, ... for every row
(compiled: 7, 8, then 0, 0, ...). With FAKE_GENERATE_NO_COMPILE=1 it answers compiled requests
with an error."""
import json
import os
import sys


def answer(request):
    model = request["model"]
    for name in ("config.json", "model.safetensors"):
        if not os.path.isfile(os.path.join(model, name)):
            return {"error": f"{model} has no {name}"}
    with open(os.path.join(model, "config.json")) as f:
        vocab = json.load(f)["vocab_size"]
    prompts, n = request["prompts"], int(request["new_tokens"])
    if len({len(p) for p in prompts}) != 1 or any(not 0 <= i < vocab for p in prompts for i in p):
        return {"error": "bad prompts"}
    if request["dtype"] not in ("f32", "bf16") or n < 1 or request["runs"] != 1:
        return {"error": "bad request"}
    mode = request["mode"]
    if mode not in ("eager", "compiled"):
        return {"error": f"bad mode {mode!r}"}
    if mode == "compiled" and os.environ.get("FAKE_GENERATE_NO_COMPILE") == "1":
        return {"error": "generate: no C++ compiler for torch.compile"}
    graphs, seconds = 0, (0.5 if mode == "eager" else 0.25) if n > 1 else 0.1
    if mode == "compiled" and n > 1 and not compiled:
        compiled.append(n)
        graphs, seconds = 1, 2.0
    row = [7 + i if mode == "eager" or i < 2 else 0 for i in range(n)]
    return {"seconds": [seconds], "tokens": [row for _ in prompts], "transformers": "fake-1.0",
            "graphs_compiled": graphs}


compiled = []  # the new_tokens of the first compiled request of several tokens


print(json.dumps({"torch": "fake", "blas": "none", "threads": int(sys.argv[sys.argv.index("--threads") + 1])}),
      flush=True)
for line in sys.stdin:
    if not line.strip():
        break
    request = json.loads(line)
    print(json.dumps(answer(request) if request.get("op") == "generate" else {"error": "not generate"}), flush=True)
