"""The HF tokenizers side of `cotan bench tokenize`.

    RAYON_NUM_THREADS=T python3 bench/tokenizers_reference.py TOKENIZER_JSON DOCS_JSONL REPEATS

Reads the documents (one JSON string per line), encodes them all with Tokenizer.encode_batch
(add_special_tokens=True) REPEATS times after one warm-up, and prints one JSON line:
{"version", "threads", "seconds": [...], "tokens"}. The thread count is rayon's, which HF reads
from RAYON_NUM_THREADS when its pool starts, so each thread count is its own process. When the
package is missing it prints {"error": ...} and exits 0.
"""
import json
import os
import sys
import time


def main():
    path, docs_path, repeats = sys.argv[1], sys.argv[2], int(sys.argv[3])
    try:
        import tokenizers
    except ImportError as e:
        print(json.dumps({"error": f"cannot import tokenizers: {e}"}))
        return
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "true")
    with open(docs_path, encoding="utf-8") as f:
        docs = [json.loads(line) for line in f]
    tok = tokenizers.Tokenizer.from_file(path)
    tok.encode_batch(docs[:256])  # warm-up: the thread pool and the caches
    seconds = []
    tokens = 0
    for _ in range(repeats):
        start = time.perf_counter()
        out = tok.encode_batch(docs)
        seconds.append(time.perf_counter() - start)
        tokens = sum(len(e.ids) for e in out)
    print(json.dumps({"version": tokenizers.__version__, "threads": int(os.environ.get("RAYON_NUM_THREADS", "0")),
                      "seconds": seconds, "tokens": tokens}))


if __name__ == "__main__":
    main()
