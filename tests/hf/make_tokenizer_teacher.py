#!/usr/bin/env python3
"""Writes tests/hf/fixtures/llama_with_tokenizer: the tiny HF Llama of fixtures/llama_gqa (made and
saved by transformers, vocabulary 64) with a tokenizer.json of exactly its 64 ids, trained and
saved by HF `tokenizers` itself, and what HF's encode gives on a few texts (expected.json). It is
the teacher directory of examples/custom_model.cpp: an HF model directory with its tokenizer.

Run by hand, never in CI (it needs the Python package `tokenizers`):

    python3 -m venv /tmp/tokenv && /tmp/tokenv/bin/pip install tokenizers
    /tmp/tokenv/bin/python tests/hf/make_tokenizer_teacher.py

The tokenizer is Llama-style: <unk> 0, <s> 1 (the config's bos_token_id, added in front by the
post-processor), </s> 2 (eos_token_id), a Metaspace pre-tokenizer and a BPE over the lowercase
letters, digits and a few signs of the training text, with <unk> for anything else. The output is
deterministic for a given `tokenizers` version.
"""

import json
import shutil
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "fixtures" / "llama_gqa"
OUT = HERE / "fixtures" / "llama_with_tokenizer"
VOCAB = 64

TRAINING_TEXT = [
    "the quick brown fox jumps over the lazy dog.",
    "a cat sat on the mat, and the dog sat on the log.",
    "she sells sea shells by the sea shore.",
    "to be or not to be, that is the question.",
    "all that glitters is not gold; all who wander are not lost.",
] * 20

TEXTS = [
    "the cat sat on the mat.",
    "a quick test of the teacher's tokenizer",
    "Upper Case and digits 42 are unknown here!",
    "",
    "   leading spaces",
]


def main():
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=["<unk>", "<s>", "</s>"], show_progress=False)
    tok.train_from_iterator(TRAINING_TEXT, trainer=trainer)
    assert tok.get_vocab_size() == VOCAB, tok.get_vocab_size()
    assert tok.token_to_id("<s>") == 1 and tok.token_to_id("</s>") == 2
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", 1)])

    OUT.mkdir(parents=True, exist_ok=True)
    for name in ("config.json", "model.safetensors"):
        shutil.copyfile(SOURCE / name, OUT / name)
    tok.save(str(OUT / "tokenizer.json"))
    config = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "add_bos_token": True,
              "tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": 64}
    (OUT / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")
    import tokenizers
    expected = {"tokenizers_version": tokenizers.__version__, "cases": []}
    reloaded = Tokenizer.from_file(str(OUT / "tokenizer.json"))
    for text in TEXTS:
        expected["cases"].append({
            "text": text,
            "with_special": reloaded.encode(text, add_special_tokens=True).ids,
            "without_special": reloaded.encode(text, add_special_tokens=False).ids,
        })
    (OUT / "expected.json").write_text(json.dumps(expected, indent=1) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
