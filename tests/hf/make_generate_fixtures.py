#!/usr/bin/env python3
"""Adds generate.json to each model of tests/hf/fixtures: the tokens transformers' greedy
`generate` produces from fixed prompts, for tests/nn/test_hf_fixtures.cpp to compare cotan's
greedy generation with, token for token, without Python.

Run by hand after make_fixtures.py, never in CI (it needs torch and transformers from PyPI):

    /tmp/hfenv/bin/python tests/hf/make_generate_fixtures.py

Each model is loaded from its directory as save_pretrained wrote it, in float32, and generates
NEW tokens greedily (do_sample=False) after each prompt, with no end-of-sequence token (so that
every prompt runs to NEW tokens). generate.json holds

    {"prompts": [[...], ...], "new_tokens": NEW, "tokens": [[...], ...], "min_margin": m}

"min_margin" is the smallest gap, over every step of every prompt, between the chosen logit and
the runner-up: an f32 implementation that agrees with transformers to 1e-5 must then choose the
same tokens. Prompts whose gap falls below 1e-3 at some step are replaced by the next candidate,
so that the comparison never rests on a near-tie.
"""

import json
from pathlib import Path

import torch
import transformers

FIXTURES = Path(__file__).resolve().parent / "fixtures"
NEW = 12
MIN_MARGIN = 1e-3


def greedy(model, prompt):
    ids = torch.tensor([prompt])
    out = model.generate(ids, max_new_tokens=NEW, do_sample=False, output_scores=True, return_dict_in_generate=True,
                         eos_token_id=None, pad_token_id=0)
    tokens = out.sequences[0, len(prompt):].tolist()
    margin = min(float(s[0].topk(2).values[0] - s[0].topk(2).values[1]) for s in out.scores)
    return tokens, margin


def main():
    torch.manual_seed(0)
    for case in sorted(p for p in FIXTURES.iterdir() if (p / "logits.json").exists()):
        model = transformers.AutoModelForCausalLM.from_pretrained(case, torch_dtype=torch.float32)
        model.eval()
        model.generation_config.eos_token_id = None
        vocab = model.config.vocab_size
        gen = torch.Generator().manual_seed(1234)
        prompts, tokens, margins = [], [], []
        tries = 0
        while len(prompts) < 3:
            tries += 1
            if tries > 200:
                raise SystemExit(f"{case.name}: no prompts without a near-tie")
            length = 1 + len(prompts) * 3
            prompt = torch.randint(0, vocab, (length,), generator=gen).tolist()
            with torch.no_grad():
                t, m = greedy(model, prompt)
            if m < MIN_MARGIN:
                continue
            prompts.append(prompt)
            tokens.append(t)
            margins.append(m)
        record = {"prompts": prompts, "new_tokens": NEW, "tokens": tokens, "min_margin": min(margins),
                  "transformers": transformers.__version__, "torch": torch.__version__}
        (case / "generate.json").write_text(json.dumps(record) + "\n")
        print(case.name, "min margin", round(min(margins), 5), "tokens", tokens[0][:6])


if __name__ == "__main__":
    main()
