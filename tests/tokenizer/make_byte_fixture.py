#!/usr/bin/env python3
"""Writes tests/tokenizer/fixtures/bytes: cotan's byte tokenizer (ids 0..255 are the bytes, 256
ends a document) as a tokenizer.json built and saved by HF `tokenizers` itself, and what HF's
encode and decode give on every document of fixtures/texts.bin.zst, in the formats of
make_fixtures.py (fixtures/README.md). tests/text/test_tokenizer.cpp then checks, without Python,
that cotan writes this tokenizer.json (text::byte_tokenizer_json(), equal as JSON), that cotan's
tokenizer.json reader gives HF's ids and decodings with it, and that the byte tokenizer itself
(text::encode_bytes) gives HF's ids on every document.

Run by hand, never in CI, after make_fixtures.py (it reads the texts that script wrote):

    python3 -m venv /tmp/tokenv && /tmp/tokenv/bin/pip install tokenizers zstandard
    /tmp/tokenv/bin/python tests/tokenizer/make_byte_fixture.py

The tokenizer: a BPE model without merges whose vocabulary maps GPT-2's stand-in character for
byte b (bytes_to_unicode, the ByteLevel alphabet) to id b and "<|endoftext|>" to 256; a ByteLevel
pre-tokenizer without the regex split and without a prefix space, so that every UTF-8 byte of the
text becomes its stand-in; the ByteLevel decoder. "<|endoftext|>" is in the vocabulary and not an
added token, so HF encodes a text that spells it as its 13 bytes, as cotan's byte tokenizer does.
The output is deterministic for a given `tokenizers` and `zstandard` version.
"""

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import make_fixtures as mf  # noqa: E402  (the fixture formats and the texts' reader)
from tokenizers import Tokenizer, decoders, models, pre_tokenizers  # noqa: E402

NAME = "bytes"
END_OF_DOCUMENT = "<|endoftext|>"


def make_bytes_tokenizer():
    vocab = {mf.BYTE_CHARS[b]: b for b in range(256)}
    vocab[END_OF_DOCUMENT] = 256
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    return tok


def read_texts():
    r = mf.Reader(mf.decompress((mf.OUT / "texts.bin.zst").read_bytes()))
    assert r.take(8) == b"CTTXT001"
    docs = []
    for _ in range(r.u32()):
        s = r.take(1)[0]
        docs.append((s, r.blob()))
    r.end()
    return docs


def main():
    docs = read_texts()
    tok = make_bytes_tokenizer()
    (mf.OUT / NAME).mkdir(parents=True, exist_ok=True)
    path = mf.OUT / NAME / "tokenizer.json"
    tok.save(str(path))
    tok = Tokenizer.from_file(str(path))
    texts = [mf.hf_text(raw) for _, raw in docs]
    rec = mf.record(tok, texts)
    adv_ids = [ids for (s, _), ids in zip(docs, rec[0]) if s == 1]
    cases = mf.decode_cases(tok, adv_ids)
    mf.write_expected(NAME, rec, [raw for _, raw in docs])
    mf.write_decode(NAME, cases)
    # What the fixture stands for: HF's ids are the UTF-8 bytes of the text HF was given.
    for text, ids in zip(texts, rec[0]):
        assert ids == list(text.encode("utf-8")), text[:60]
    assert tok.encode(END_OF_DOCUMENT).ids == list(END_OF_DOCUMENT.encode())
    assert tok.decode([104, 105, 256]) == "hi" + END_OF_DOCUMENT
    mf.read_back(docs, {NAME: rec}, {NAME: cases})
    import tokenizers
    print(json.dumps({"tokenizers": tokenizers.__version__, "documents": len(docs),
                      "tokens": sum(len(ids) for ids in rec[0]), "decode_cases": len(cases[0])}))


if __name__ == "__main__":
    main()
