#!/usr/bin/env python3
"""Loads cotan's exported students of every study variant into HF transformers and compares their
logits with cotan's. Run by hand, with torch and transformers from PyPI:

    COTAN_EXPORT_DIR=/tmp/cotan-export build/tests/test_hf_fixtures   # writes the students
    /tmp/hfenv/bin/python tests/hf/check_remote_code.py /tmp/cotan-export

Softmax students must load as plain Qwen2 models; the other kinds must be refused without
trust_remote_code and, with it, run the kind's math (nn/hf/modeling_cotan.py) within 2e-6 of
cotan's f32 logits. For every kind, generate() must choose the tokens of a greedy loop over
whole-sequence forward passes (the remote code keeps no KV cache, and must not be handed one
token as if it did), and the remote code must refuse a padded batch.
"""

import json
import sys
from pathlib import Path

import torch
import transformers
from transformers import AutoModelForCausalLM


def main(root: Path) -> int:
    expected = json.loads((root / "cotan_logits.json").read_text())
    ids = torch.tensor(expected["ids"])
    failures = 0
    for name in ("softmax", "sink", "affine_linear_clip", "affine_sigmoid", "gated", "affine_gated"):
        directory = root / name
        refused = ""
        if name != "softmax":
            try:
                AutoModelForCausalLM.from_pretrained(directory)
                refused = "LOADED WITHOUT trust_remote_code"
                failures += 1
            except Exception as e:  # transformers refuses an unknown model_type
                refused = f"refused without trust_remote_code ({type(e).__name__})"
        model = AutoModelForCausalLM.from_pretrained(directory, trust_remote_code=name != "softmax").eval()
        with torch.no_grad():
            logits = model(ids).logits.to(torch.float64)
        ours = torch.tensor(expected[name]["logits"], dtype=torch.float64).reshape(logits.shape)
        diff = (logits - ours).abs().max().item()
        ok = diff <= 2e-6 * max(1.0, ours.abs().max().item())
        # generate() (which would use a KV cache when the model has one) must choose what a greedy
        # loop over whole-sequence forward passes chooses.
        config = model.generation_config
        config.eos_token_id, config.pad_token_id = None, 0
        with torch.no_grad():
            generated = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=6, do_sample=False,
                                       generation_config=config)[:, ids.shape[1]:]
            loop = ids
            for _ in range(6):
                loop = torch.cat([loop, model(loop).logits[:, -1].argmax(-1, keepdim=True)], dim=1)
        same_tokens = torch.equal(generated, loop[:, ids.shape[1]:])
        # A padded batch is refused, not misread (the remote code takes no attention mask).
        padded_refused = name == "softmax"
        if name != "softmax":
            try:
                model(ids, attention_mask=torch.cat([torch.zeros_like(ids[:, :1]), torch.ones_like(ids[:, 1:])], 1))
            except ValueError:
                padded_refused = True
        ok = ok and same_tokens and padded_refused
        failures += not ok
        print(f"{name:20s} {type(model).__name__:18s} max |HF - cotan| = {diff:.2e}, generate "
              f"{'= greedy loop' if same_tokens else '!= GREEDY LOOP'}"
              f"{'' if padded_refused else ', PADDING NOT REFUSED'} {'ok' if ok else 'FAIL'}"
              f"{'; ' + refused if refused else ''}")
    print(f"torch {torch.__version__}, transformers {transformers.__version__}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
