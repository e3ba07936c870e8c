#!/usr/bin/env python3
"""Writes tests/tokenizer/fixtures: small tokenizer.json files trained and saved by HF `tokenizers`
itself, a corpus of texts, and what HF's encode and decode give on every text, so that cotan's
text/tokenizer.cpp can be compared with HF without Python.

Run by hand, never in CI. It needs the Python packages `tokenizers` and `zstandard` and the Debian
packages that hold the texts:

    apt-get install fortunes fortunes-min fortunes-de fortunes-es fortunes-it fortunes-ru \
        fortunes-zh fortunes-pl fortunes-cs fortunes-bg fortunes-br base-files
    python3 -m venv /tmp/tokenv && /tmp/tokenv/bin/pip install tokenizers zstandard
    /tmp/tokenv/bin/python tests/tokenizer/make_fixtures.py

It writes (all integers little-endian u32 unless said otherwise; every .zst is one zstd frame,
level 19); fixtures/README.md, which is written by hand and left alone, says more:

  fixtures/texts.bin.zst         b"CTTXT001", u32 document count, then per document:
                                 u8 set (0 large, 1 adversarial), u32 byte length, the bytes.
  fixtures/NAME/tokenizer.json   the tokenizer, as tokenizer.save() wrote it (exotic's merges then
                                 rewritten in the legacy "a b" spelling), for NAME in TOKENIZERS.
  fixtures/NAME/expected.bin.zst b"CTEXP002", u32 document count (the order of texts.bin), then per
                                 document: u32 n, n ids of encode(text, add_special_tokens=True);
                                 u32 m, m ids of encode(text, add_special_tokens=False);
                                 STR decode(ids, skip_special_tokens=False);
                                 STR decode(ids, skip_special_tokens=True) (ids: the first list).
                                 STR is u32 length + bytes, or u32 0xFFFFFFFF, u32 length + prefix,
                                 u32 length + suffix for prefix + the document's bytes + suffix
                                 (b"CTEXP001" and the first form only with SAME_AS_TEXT = False).
  fixtures/NAME/decode.bin.zst   b"CTDEC001", u32 case count, then per case: u32 n, n ids (made up:
                                 random ids, lone byte tokens, ids past the vocabulary), u32 length
                                 + bytes of decode(ids, False), u32 length + bytes of decode(ids, True).
  fixtures/summary.json          counts, sources, versions, and the feature checks' results.

A document that is not valid UTF-8 is stored as its raw bytes; HF is given
raw.decode("utf-8", errors="replace"), which is what the C++ side does with such bytes.

The output is deterministic: the same packages and the same `tokenizers`/`zstandard` versions give
byte-identical files (about two minutes on one core). Before writing, it checks that the
adversarial texts reach every feature of every tokenizer (switching the feature off in the JSON
changes HF's output); at the end it reads every file back and checks it against HF again.
"""

import os

# One thread: training and encoding do not depend on it, but the machine is shared and the
# trainer's results should not even be suspected of depending on scheduling.
os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"

import hashlib
import json
import random
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import tokenizers
import zstandard
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

OUT = Path(__file__).resolve().parent / "fixtures"
ZSTD_LEVEL = 19
MAX_JSON = 400_000
# With SAME_AS_TEXT (magic CTEXP002), a decode result that is the document's own bytes with a
# prefix and a suffix around them (the template's "<s> ", nothing at all, ...) is written as
# u32 0xFFFFFFFF, u32 length + prefix bytes, u32 length + suffix bytes. That halves
# expected.bin.zst, which otherwise holds one more compressed copy of the corpus per tokenizer.
# False writes CTEXP001, where every decode result is spelled out.
SAME_AS_TEXT = True
SAME = 0xFFFFFFFF
EXPECTED_MAGIC = b"CTEXP002" if SAME_AS_TEXT else b"CTEXP001"

# ------------------------------------------------------------------------------------------------
# Texts
# ------------------------------------------------------------------------------------------------

# (language, Debian packages, bytes of fortunes taken into the large set)
FORTUNES = [
    ("en", ["fortunes", "fortunes-min"], 1_850_000),
    ("de", ["fortunes-de"], 50_000),
    ("es", ["fortunes-es"], 40_000),
    ("it", ["fortunes-it"], 35_000),
    ("ru", ["fortunes-ru"], 45_000),
    ("pl", ["fortunes-pl"], 35_000),
    ("cs", ["fortunes-cs"], 35_000),
    ("bg", ["fortunes-bg"], 20_000),
    ("br", ["fortunes-br"], 30_000),
    ("zh", ["fortunes-zh"], 30_000),
]
LICENSES = ["Apache-2.0", "Artistic", "BSD", "GPL-3", "MPL-2.0"]

notes = []  # what the script saw, for the README


def package_files(pkg):
    """The fortune files a Debian package installs: real UTF-8 text files, sorted, without the
    .dat indexes, without the offensive off/ collections."""
    out = subprocess.run(["dpkg-query", "-L", pkg], check=True, capture_output=True, text=True).stdout
    files = []
    for line in sorted(set(out.splitlines())):
        p = Path(line)
        if not line.startswith("/usr/share/games/fortunes") or p.suffix == ".dat" or "off" in p.parts:
            continue
        if p.is_file():
            files.append(p)
    return files


def fortune_docs(path):
    """Each fortune of a file, verbatim with its newlines, separated by lines holding only %."""
    text = path.read_bytes().decode("utf-8")
    docs, cur = [], []
    for line in text.splitlines(keepends=True):
        if line.rstrip("\r\n") == "%":
            docs.append("".join(cur))
            cur = []
        else:
            cur.append(line)
    docs.append("".join(cur))
    return [d for d in docs if d.strip()]


def language_docs(pkgs):
    seen, docs, skipped = set(), [], []
    for pkg in pkgs:
        for p in package_files(pkg):
            real = p.resolve()
            data = real.read_bytes()
            h = hashlib.sha256(data).digest()
            if h in seen:
                continue
            seen.add(h)
            try:
                data.decode("utf-8")
            except UnicodeDecodeError:
                skipped.append(str(p))
                continue
            docs.extend(fortune_docs(real))
    return docs, skipped


def take_evenly(docs, budget):
    """About `budget` bytes of documents spread evenly over the list, in its order."""
    total = sum(len(d.encode()) for d in docs)
    if total <= budget:
        return list(docs)
    n = len(docs)
    k = max(1, round(n * budget / total))
    return [docs[(i * n) // k] for i in range(k)]


def license_docs():
    docs = []
    for name in LICENSES:
        text = Path("/usr/share/common-licenses", name).read_text(encoding="utf-8")
        for para in text.split("\n\n"):
            if para.strip():
                docs.append(para + "\n")
    return docs


def large_set():
    by_lang, large = {}, []
    for lang, pkgs, budget in FORTUNES:
        docs, skipped = language_docs(pkgs)
        if skipped:
            notes.append(f"{lang}: skipped {len(skipped)} files that are not UTF-8: {skipped}")
        by_lang[lang] = docs
        taken = take_evenly(docs, budget)
        notes.append(f"large/{lang}: {len(taken)} of {len(docs)} fortunes, "
                     f"{sum(len(d.encode()) for d in taken)} bytes")
        large.extend(taken)
    lic = license_docs()
    notes.append(f"large/licenses ({', '.join(LICENSES)}): {len(lic)} paragraphs, "
                 f"{sum(len(d.encode()) for d in lic)} bytes")
    large.extend(lic)
    return [d.encode("utf-8") for d in large], by_lang


SPECIAL_STRINGS = [
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>",
    "<s>", "</s>", "<unk>", "[INST]", "[/INST]", "[CLS]", "[SEP]", "[MASK]", "[NORM]", "<Mask>",
    "Hello World", "zap", "<think>", "</think>", "naïve café", "Ⅻ", "<mask>", "<|sep|>", "café",
]

# Words put into llama3's vocabulary without merges that make them: only ignore_merges finds them.
LLAMA3_EXTRA_WORDS = [" supercalifragilistic", " Zalgo", "antidisestablishmentarianism", " привет",
                      " 東京", " naïveté", " rhythm", " 12"]


def adversarial_set():
    docs = []

    def add(s):
        docs.append(s.encode("utf-8") if isinstance(s, str) else bytes(s))

    # Whitespace: runs of every length 1..12 in the middle, leading, trailing and alone.
    units = [" ", "\t", " \t", "\n", "\r\n", "\r", " \t\n\r\u3000"]
    for unit in units:
        for n in range(1, 13):
            ws = unit * n if unit in ("\r\n",) else (unit * n)[:n] if len(unit) > 1 else unit * n
            for form in ("word{}word", "{}word", "word{}", "{}"):
                add(form.format(ws))
    for s in ["", " ", "\n", "\t", "\r", "\r\n", "  ", "Hello  world", "Hello world  ", "  Hello",
              "a \n b", "a\n\n\nb", "a\n \n b", "end.   \n", "x \r\n y", "x\r\r\ny", "x\n\r y",
              "two.  Spaces.  After.  Dots.", "tab\tseparated\tvalues\n1\t2\t3\n", "line one\nline two\n",
              "trailing spaces   ", "   leading spaces", "\n\nleading newlines", "trailing newlines\n\n\n",
              "mixed \t \n \r\n \t  end", " ! ", "  !!  ", "a  !b", "?\n\n", "...\n\n\n   \n",
              "a\u00a0b \u00a0 c\u00a0\u00a0d", "zero\u200bwidth\u200b \u200b", "line\u2028separator\u2029para",
              "next\u0085line", "\ufeffBOM at start", "BOM\ufeffinside", "\u3000ideographic\u3000space\u3000",
              "\u2003em\u2002en\u2009thin\u202fnarrow", "\x0bvertical\x0ctab and form feed",
              "\x00nul\x00byte", "\x01\x02\x03\x1f\x7f controls", "\x1b[31mred\x1b[0m", "b\x08a\x08c\x08k",
              "``quoted'' text", "````", "a\x0bb\x0cc \x0b\x0c d"]:
        add(s)

    # Digits.
    for n in range(1, 41):
        d = "".join(str((i * 7 + 3) % 10) for i in range(n))
        add(d)
        add(f"abc{d}def and {d[: n // 2]},{d[n // 2:]} or {d[: n // 3]}.{d[n // 3:]}")
    for s in ["1,234,567,890", "3.14159265358979323846264338327950288", "1.000.000,50 €", "$1,000.00 and 10%",
              "1st 2nd 3rd 4th 21st", "covid19 x86_64 i18n l10n k8s", "123abc456 abc123 123abc", "a1b2c3d4e5",
              "2024-01-02T03:04:05Z", "0x1F 0b1010 1e-10 6.02e23 -42 +7", "٣٤٥ ٠١٢٣٤٥٦٧٨٩", "१२३४ ৫৬",
              "①②③ ½ ¾ ²³ x² H₂O", "１２３４５ Ｆｕｌｌ１２３", "一二三 四五六", "ⅠⅡⅢ Ⅻ ⅻ", "𝟏𝟐𝟑 𝐀𝐁𝐂",
              "9" * 100, "12345678901234567890123456789012345678901234567890", "1 22 333 4444 55555 666666",
              "phone: +1 (555) 123-4567", "v1.2.3-rc4", "3:45pm 12:00"]:
        add(s)

    # Contractions.
    contractions = ["I'm", "I'M", "you'RE", "You're", "it's", "IT'S", "we'll", "WE'LL", "'s", "'S", "don't",
                    "DON'T", "it’s", "don’t", "they'd", "THEY'D", "we've", "WE'VE", "you'Ll", "'t", "'re",
                    "'ve", "'m", "'ll", "'d", "O'Neil", "rock 'n' roll", "y'all'd've", "''s", "'''", "' s",
                    "dogs' bones", "the '90s", "He said 'hi'", "ʼs modifier"]
    for c in contractions:
        add(c)
        add(f"Well, {c} fine.")
    for s in ["'Twas the night", "'TIS TRUE", "'Sblood", "'MOST", "I'MPOSSIBLE", "YOU'REALLY", "'LLama", "'DEAD",
              "'Ve got", "'Re: subject", "WE'VEN'T"]:
        add(s)
    add("'s at the start and at the end's")
    add("I'M SURE IT'S FINE, DON'T WORRY, WE'LL SEE, YOU'RE RIGHT, THEY'VE GONE")

    # Scripts, emoji, normalization.
    for s in ["你好，世界！这是一个测试。", "中文字符和English混合123", "日本語のテキスト、ひらがなとカタカナ。",
              "カタカナ ｶﾀｶﾅ (halfwidth)", "한국어 텍스트입니다. 안녕하세요!", "한글 자모: ᄒ ᅡ ᆫ",
              "👨‍👩‍👧‍👦 family", "🏳️‍🌈 flag", "👍🏽👍🏿 thumbs", "🇺🇸🇩🇪🇯🇵 flags", "emoji😀😃😄in words",
              "❤️ ❤ ☺️", "🙂" * 20, "e\u0301 vs \u00e9", "e\u0301\u0302\u0303\u0304 stacked",
              "Z\u0351\u0352\u0353\u0354a\u0355\u0356\u0357l\u0358\u0359g\u035a\u035bo", "n\u0303 \u00f1 \u1e69 s\u0323\u0307",
              "Å \u212b A\u030a", "مرحبا بالعالم", "שלום עולם", "עברית עם English", "नमस्ते दुनिया",
              "क्षत्रिय", "สวัสดีชาวโลก", "Ｆｕｌｌｗｉｄｔｈ　ｔｅｘｔ", "ﬁnance ﬂow ﬀ", "Ⅻ chapters", "x² + y² = z²",
              "İstanbul ıi İI", "ΟΔΟΣ οδος ΣΊΣΥΦΟΣ", "Straße STRASSE ẞ", "Ǆ ǅ ǆ ǈ", "ﬃ ﬄ ﬅ", "Ω Ω K K",
              "µ μ", "ǅungla", "Ⓐⓑⓒ", "㍿ ㋿ ㌔", "…‥", "‘single’ “double” «guillemets» „low“",
              "— – - ‐ ‑ ‒ −", "©®™℠", "🤷‍♂️🧑🏻‍💻", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "\U0001F600\U0001F64F\U0001F680",
              "\U00010348 gothic", "\uFFFD replacement", "\uFFFF\uFFFE nonchars", "\U0010FFFD private",
              "\uE000 private use", "Ελληνικά κείμενα", "Русский текст с ёлкой", "Ukrainian: ґїєі",
              "Tiếng Việt có dấu", "ქართული", "Հայերեն", "ትግርኛ", "ᚠᚢᚦ runes"]:
        add(s)

    # Text touching added tokens.
    forms = ["{t}", "{t}{t}", "{t} {t}", "{t}hello", "hello{t}", "a{t}b", " {t} ", "  {t}  ", "x {t} y",
             "x  {t}  y", "\n{t}\n", "\t{t}\t", "{t}\n\nHello there.", "Hi {t}. Bye", "({t})", "{t}s", "s{t}",
             "{t}é", "é {t}", "{t} 123"]
    for t in SPECIAL_STRINGS:
        for form in forms:
            add(form.format(t=t))
        add(t.lower())
        add(t.upper())
        add(t[: (len(t) + 1) // 2])
        add(t[:-1])
        add(t[1:])
        add(t[: (len(t) + 1) // 2] + " " + t)
    for s in ["<|endof", "<|endoftext|", "<<|endoftext|>>", "<|<|endoftext|>|>", "<|endoftext|><|endoftext|>x",
              "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n"
              "<|im_start|>assistant\n<think>\n\n</think>\n\nHello!<|im_end|>\n",
              "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>",
              "<s>[INST] <<SYS>>\nBe nice.\n<</SYS>>\n\nHello [/INST] Hi there</s><s>[INST] More [/INST]",
              "[CLS] sentence one [SEP] sentence two [SEP]", "[CLS][SEP][MASK][MASK]", "[MASK]ed [MASK] un[MASK]",
              "zap zapper zap, zap! _zap zap_ zap9 9zap", "HELLO WORLD hello world Hello  World", "<MASK> <mask> <Mask>",
              "xii XII Ⅻ ⅻ", "[norm] [NORM] [Norm]", "naïve café naïve  café", "<s></s><unk>", "</s>s<s>"]:
        add(s)
    for w in LLAMA3_EXTRA_WORDS:
        add(f"The{w} and{w}{w}.")
    add("A supercalifragilistic Zalgo said привет in 東京 with rhythm, 12 times, naïveté antidisestablishmentarianism")

    # Invalid UTF-8.
    for b in [b"\x80", b"abc\x80def", b"\xbf\xbf", b"\x80\x81\x82\x83", b"\xc3", b"abc\xc3", b"\xc3(", b"\xe2\x82",
              b"\xe2\x82x", b"\xe2\x28\xa1", b"\xf0\x9f\x98", b"\xf0\x9f\x98 ok", b"\xf0\x28\x8c\xbc",
              b"\xf0\x90\x28\xbc", b"\xc0\xaf", b"\xc1\xbf", b"\xe0\x80\xaf", b"\xf0\x80\x80\xaf", b"\xed\xa0\x80",
              b"\xed\xbf\xbf", b"\xed\xa0\x80\xed\xb0\x80", b"\xf4\x90\x80\x80", b"\xf5\x80\x80\x80",
              b"\xf8\x88\x80\x80\x80", b"\xfc\x84\x80\x80\x80\x80", b"\xfe\xff", b"\xff", b"\xfe", b"hello \xff world",
              b"caf\xe9", b"\xe4\xbd\xa0\xe5\xa5", b"\xe0\xa0", b"\xf4\x8f\xbf", b"\xef\xbb\xbf\x80BOM",
              b"<|endoftext|>\x80", b"\x80<|endoftext|>", b"<s>\xff</s>", b" \x80 ", b"\xc3\xa9\x80\xc3\xa9",
              b"\xf0\x9f\x98\x80\xf0\x9f\x98", b"emoji \xf0\x9f\x98\x80 and \xf0\x9f broken",
              b"\x80\x80  \x80\n\x80", b"I\xe2\x80m", b"don\xe2\x80\x99t\xe2\x80", b"12\xff34\xfe56", b"\xc2",
              b"\xc2\xa0\xc2", b"\xe1\x80\xe1\x80\x80", bytes(range(0x80, 0x100)), bytes(range(0x00, 0x80))]:
        add(b)

    # Long words and runs.
    for s in ["a" * 2000, "ab" * 700, "ab " * 500, "🙂" * 300, "9" * 1000, "x" + " " * 500 + "y", "\n" * 300,
              "ﬁ" * 100, "안녕하세요" * 60, "-" * 400, "=" * 80 + "\n" + "-" * 80, "." * 300, "_" * 200 + "x",
              "Ⅻ" * 50, "'s" * 100, "<|endoftext|>" * 30]:
        add(s)

    # Random strings over a pool of awkward characters.
    rng = random.Random(20240601)
    pool = list(" \t\n\r\u00a0\u3000abcxyzABCXYZ0123456789.,;:!?'\"-_()[]<>|/\\@#$%^&*~`+=") + \
        list("éüßẞİıΣσςﬁⅫ²①１Ａ你好日本語한국🙂👍🏽\u200d\u0301\u0308\ufeff\u2028\u0085") + \
        ["<|endoftext|>", "<s>", "[CLS]", "[MASK]", "'s", "'LL", " zap ", "Hello World", "\ufffd"]
    for _ in range(120):
        add("".join(rng.choice(pool) for _ in range(rng.randint(1, 60))))
    return docs


# ------------------------------------------------------------------------------------------------
# Tokenizers
# ------------------------------------------------------------------------------------------------

QWEN2_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
            r"|\s+(?!\S)|\s+")
LLAMA3_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
             r"|\s*[\r\n]+|\s+(?!\S)|\s+")


def byte_level_chars():
    """GPT-2's bytes_to_unicode table."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


BYTE_CHARS = byte_level_chars()


def byte_level(s):
    return "".join(BYTE_CHARS[b] for b in s.encode("utf-8"))


def as_json(tok):
    return json.loads(tok.to_str())


def from_json(d):
    return Tokenizer.from_str(json.dumps(d, ensure_ascii=False))


def insert_byte_tokens(d):
    """Put <0x00>..<0xFF> into the vocabulary right after the first three ids (<unk>, <s>, </s>),
    as SentencePiece's Llama and Mistral models have them, shifting the learned pieces up."""
    vocab = d["model"]["vocab"]
    items = sorted(vocab.items(), key=lambda kv: kv[1])
    assert [k for k, _ in items[:3]] == ["<unk>", "<s>", "</s>"], items[:3]
    new = {k: v for k, v in items[:3]}
    for b in range(256):
        new[f"<0x{b:02X}>"] = 3 + b
    for k, v in items[3:]:
        assert k not in new
        new[k] = v + 256
    d["model"]["vocab"] = new
    return d


def train(tok, docs, **kw):
    kw.setdefault("show_progress", False)
    tok.train_from_iterator(docs, trainers.BpeTrainer(**kw), length=len(docs))
    return tok


def fixed_alphabet(tok, docs, n):
    """The n most frequent chars of the words the trainer will see, ties broken by code point.

    BpeTrainer's own limit_alphabet cut sorts a HashMap's entries unstably, so chars of equal count
    at the cut come out in a different order from run to run; given these n chars as
    initial_alphabet with limit_alphabet=n, it keeps exactly them."""
    counts = {}
    for d in docs:
        text = tok.normalizer.normalize_str(d) if tok.normalizer else d
        for w, _ in tok.pre_tokenizer.pre_tokenize_str(text):
            for c in w:
                counts[c] = counts.get(c, 0) + 1
    return sorted(counts, key=lambda c: (-counts[c], ord(c)))[:n]


def make_gpt2(en, _multi):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    train(tok, en, vocab_size=4000, special_tokens=["<|endoftext|>"],
          initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    # Non-special added tokens go through ByteLevel's decoder too. "naïve café" holds a char that
    # is not in its table (the space), so the decoder passes the token's UTF-8 through; every char
    # of "café" is in the table (é stands for the byte 0xE9), so it becomes the bytes 63 61 66 E9,
    # which are not UTF-8: HF decodes the token as "caf\ufffd".
    tok.add_tokens([AddedToken("naïve café", normalized=False), AddedToken("café", normalized=False)])
    # RoBERTa's <mask> takes the spaces before it; another special takes those after it.
    tok.add_special_tokens([AddedToken("<mask>", special=True, lstrip=True),
                            AddedToken("<|sep|>", special=True, rstrip=True)])
    return tok


def make_qwen2(en, multi):
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_RE), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    train(tok, en[::2] + multi, vocab_size=4500, initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    # As in Qwen's files: the specials after the learned vocabulary, in added_tokens only.
    tok.add_special_tokens(["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
    tok.add_tokens([AddedToken("<think>", normalized=False, special=False),
                    AddedToken("</think>", normalized=False, special=False)])
    return tok


def make_llama3(en, _multi):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_RE), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    train(tok, en[1::2], vocab_size=4500, initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    d = as_json(tok)
    d["model"]["ignore_merges"] = True
    vocab = d["model"]["vocab"]
    for w in LLAMA3_EXTRA_WORDS:
        b = byte_level(w)
        if b not in vocab:
            vocab[b] = len(vocab)
    tok = from_json(d)
    tok.add_special_tokens(["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"])
    bos = tok.token_to_id("<|begin_of_text|>")
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single="<|begin_of_text|> $A",
                                      pair="<|begin_of_text|> $A <|begin_of_text|>:1 $B:1",
                                      special_tokens=[("<|begin_of_text|>", bos)])])
    return tok


def sentencepiece_like(docs, vocab_size, limit_alphabet, normalizer, pre_tokenizer, fuse_unk):
    """A BPE with byte_fallback trained on words that start with ▁, as SentencePiece makes them."""
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=fuse_unk))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    # For training only: cut before each ▁ so that no piece spans two words.
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="never", split=True)
    train(tok, docs, vocab_size=vocab_size, limit_alphabet=limit_alphabet, special_tokens=["<unk>", "<s>", "</s>"],
          initial_alphabet=fixed_alphabet(tok, docs, limit_alphabet))
    d = insert_byte_tokens(as_json(tok))
    d["normalizer"] = normalizer
    d["pre_tokenizer"] = pre_tokenizer
    return from_json(d)


def make_llama2(en, multi):
    tok = sentencepiece_like(en[::3] + multi, 3500, 180,
                             as_json_part(normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])),
                             None, fuse_unk=True)
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s>:1 $B:1",
                                                       special_tokens=[("<s>", 1)])
    return tok


def make_mistral(en, _multi):
    meta = as_json_part(pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=False))
    tok = sentencepiece_like(en[1::3], 3500, 100, None, meta, fuse_unk=False)
    # [INST] takes the spaces after it and [/INST] those before it: what follows [INST] is then a
    # piece that does not start the text, which prepend_scheme "first" leaves without a ▁.
    tok.add_special_tokens([AddedToken("[INST]", special=True, rstrip=True),
                            AddedToken("[/INST]", special=True, lstrip=True)])
    tok.decoder = decoders.Sequence([decoders.ByteFallback(),
                                     decoders.Metaspace(replacement="▁", prepend_scheme="first", split=False)])
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A $B:1",
                                                       special_tokens=[("<s>", 1)])
    return tok


def as_json_part(component):
    """The JSON HF writes for one normalizer / pre-tokenizer / decoder."""
    t = Tokenizer(models.BPE())
    if isinstance(component, normalizers.Normalizer):
        t.normalizer = component
        return as_json(t)["normalizer"]
    if isinstance(component, pre_tokenizers.PreTokenizer):
        t.pre_tokenizer = component
        return as_json(t)["pre_tokenizer"]
    raise TypeError(component)


def make_exotic(en, _multi):
    tok = Tokenizer(models.BPE(unk_token="[UNK]", fuse_unk=False, continuing_subword_prefix="##",
                               end_of_word_suffix="</w>"))
    tok.normalizer = normalizers.Sequence([
        normalizers.NFKC(), normalizers.Lowercase(), normalizers.Strip(left=True, right=True),
        normalizers.Replace(Regex(r"\s{3,}"), "  "), normalizers.Replace("``", '"')])
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.Split(" ", behavior="merged_with_previous", invert=False),
        pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)])
    # BpeTrainer numbers the pieces "##c", "c</w>" and "##c</w>" as it meets them walking a HashMap
    # of words, and breaks ties between merges by those numbers: giving them all as special tokens
    # first fixes their ids and so the merges. They are then dropped from added_tokens (they stay
    # in the vocabulary).
    docs = en[2::3]
    alphabet = fixed_alphabet(tok, docs, 60)
    affixed = [p for c in alphabet for p in ("##" + c, c + "</w>", "##" + c + "</w>")]
    train(tok, docs, vocab_size=3000, limit_alphabet=len(alphabet), initial_alphabet=alphabet,
          special_tokens=["[UNK]"] + affixed, continuing_subword_prefix="##", end_of_word_suffix="</w>")
    d = as_json(tok)
    d["added_tokens"] = [t for t in d["added_tokens"] if t["content"] not in set(affixed)]
    tok = from_json(d)
    tok.add_tokens([
        AddedToken("[CLS]", special=True, lstrip=True),
        AddedToken("[SEP]", special=True, rstrip=True),
        AddedToken("[MASK]", special=True, lstrip=True, rstrip=True, single_word=True),
        AddedToken("[NORM]", special=True, normalized=True),
        AddedToken("<Mask>", special=False, normalized=True),
        AddedToken("Hello World", special=False, normalized=True, rstrip=True),
        AddedToken("Ⅻ", special=False, normalized=True),
        AddedToken("zap", special=False, normalized=False, single_word=True),
        AddedToken("naïve café", special=False, normalized=False, lstrip=True, single_word=True),
    ])
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.Replace("##", ""),
                                     decoders.Replace(Regex("</w>"), " "), decoders.Fuse(),
                                     # Strip's right side (stop > 0) panics in HF on a token shorter
                                     # than `stop` (an empty decode, say), so only the left.
                                     decoders.Strip(" ", 1, 0)])
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
                                                       special_tokens=[("[CLS]", tok.token_to_id("[CLS]")),
                                                                       ("[SEP]", tok.token_to_id("[SEP]"))])
    return tok


_small = {}


def small_byte_level(en):
    """One small byte-level BPE shared by the Split variants."""
    if "d" not in _small:
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        train(tok, en[::4], vocab_size=1500, special_tokens=["<|endoftext|>"],
              initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
        _small["d"] = as_json(tok)
    return from_json(_small["d"])


def byte_level_variant(en, normalizer, pre_tokenizer, post_processor):
    tok = small_byte_level(en)
    if normalizer is not None:
        tok.normalizer = normalizer
    tok.pre_tokenizer = pre_tokenizer
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = post_processor
    return tok


def make_split_removed_next(en, _multi):
    """CRs removed, a run of spaces glued to what follows, then ByteLevel with add_prefix_space,
    which puts a space before every piece that does not start with one."""
    return byte_level_variant(en, normalizers.NFKD(), pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(r"\r+"), behavior="removed", invert=False),
        pre_tokenizers.Split(Regex(r" +"), behavior="merged_with_next", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True)]),
        processors.ByteLevel(add_prefix_space=True, trim_offsets=True))


def make_split_contiguous_invert(en, _multi):
    """Digit runs cut out, vertical tabs and form feeds removed (by keeping what an inverted
    pattern matches), runs of -=_*#~. kept together, each capital starting a piece (inverted
    merged_with_previous), then ByteLevel's own regex."""
    return byte_level_variant(en, normalizers.NFD(), pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=False),
        pre_tokenizers.Split(Regex(r"[^\x0b\x0c]+"), behavior="removed", invert=True),
        pre_tokenizers.Split(Regex(r"[-=_*#~.]"), behavior="contiguous", invert=False),
        pre_tokenizers.Split(Regex(r"\p{Lu}"), behavior="merged_with_previous", invert=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)]),
        processors.ByteLevel(trim_offsets=False))


TOKENIZERS = {
    "gpt2": make_gpt2,
    "qwen2": make_qwen2,
    "llama3": make_llama3,
    "llama2": make_llama2,
    "mistral": make_mistral,
    "exotic": make_exotic,
    "split_removed_next": make_split_removed_next,
    "split_contiguous_invert": make_split_contiguous_invert,
}


def save(tok, name):
    """Saves as HF does; exotic's merges are then rewritten as legacy "a b" strings."""
    d = OUT / name
    d.mkdir(parents=True, exist_ok=True)
    path = d / "tokenizer.json"
    tok.save(str(path))
    if name == "exotic":
        j = json.loads(path.read_text(encoding="utf-8"))
        merges = j["model"]["merges"]
        assert all(" " not in a and " " not in b for a, b in merges)
        j["model"]["merges"] = [f"{a} {b}" for a, b in merges]
        path.write_text(json.dumps(j, indent=2, ensure_ascii=False), encoding="utf-8")
    size = path.stat().st_size
    assert size <= MAX_JSON, (name, size)
    return path


# ------------------------------------------------------------------------------------------------
# Recording
# ------------------------------------------------------------------------------------------------

def hf_text(raw):
    return raw.decode("utf-8", errors="replace")


def u32(n):
    return struct.pack("<I", n)


def u32s(xs):
    return struct.pack(f"<{len(xs)}I", *xs)


def blob(b):
    return u32(len(b)) + b


def compress(data):
    return zstandard.ZstdCompressor(level=ZSTD_LEVEL, threads=0, write_checksum=True).compress(data)


def decompress(data):
    return zstandard.ZstdDecompressor().decompress(data)


def record(tok, texts):
    ids_t = [e.ids for e in tok.encode_batch(texts, add_special_tokens=True)]
    ids_f = [e.ids for e in tok.encode_batch(texts, add_special_tokens=False)]
    dec_f = tok.decode_batch(ids_t, skip_special_tokens=False)
    dec_t = tok.decode_batch(ids_t, skip_special_tokens=True)
    return ids_t, ids_f, dec_f, dec_t


def decode_cases(tok, adv_ids):
    """Made-up id sequences for decode alone: random ids, byte tokens that do not form UTF-8,
    specials between words, ids past the vocabulary."""
    rng = random.Random(7)
    vocab = tok.get_vocab(with_added_tokens=True)
    n = tok.get_vocab_size(with_added_tokens=True)
    inv = {v: k for k, v in vocab.items()}
    added_ids = list(tok.get_added_tokens_decoder())
    byte_ids = [vocab[f"<0x{b:02X}>"] for b in range(256) if f"<0x{b:02X}>" in vocab]
    if not byte_ids:  # byte-level: the single-byte tokens
        byte_ids = [vocab[c] for c in BYTE_CHARS.values() if c in vocab]
    words = [i for i in range(n) if i in inv and i not in added_ids and i not in byte_ids]
    cases = [[], [n], [n + 5, 0], added_ids, added_ids[::-1] + added_ids]
    for _ in range(80):
        cases.append([rng.choice(byte_ids) for _ in range(rng.randint(1, 8))])
    for _ in range(80):
        cases.append([rng.choice(words if rng.random() < 0.6 else added_ids + byte_ids)
                      for _ in range(rng.randint(1, 20))])
    for _ in range(40):
        cases.append([rng.randrange(n + 3) for _ in range(rng.randint(1, 30))])
    for ids in adv_ids[::10]:  # real encodings with pieces cut off at either end
        if len(ids) > 2:
            a, b = sorted(rng.sample(range(len(ids) + 1), 2))
            cases.append(ids[a:b])
    dec_f = tok.decode_batch(cases, skip_special_tokens=False)
    dec_t = tok.decode_batch(cases, skip_special_tokens=True)
    return cases, dec_f, dec_t


def write_texts(docs):
    buf = bytearray(b"CTTXT001") + u32(len(docs))
    for s, raw in docs:
        buf += bytes([s]) + blob(raw)
    (OUT / "texts.bin.zst").write_bytes(compress(bytes(buf)))


def decoded_blob(text, raw):
    b = text.encode("utf-8")
    i = b.find(raw) if SAME_AS_TEXT and raw else -1
    if i < 0 or len(b) - len(raw) >= len(raw):
        return blob(b)
    return u32(SAME) + blob(b[:i]) + blob(b[i + len(raw):])


def write_expected(name, rec, raws):
    ids_t, ids_f, dec_f, dec_t = rec
    buf = bytearray(EXPECTED_MAGIC) + u32(len(ids_t))
    for a, b, c, d, raw in zip(ids_t, ids_f, dec_f, dec_t, raws):
        buf += u32(len(a)) + u32s(a) + u32(len(b)) + u32s(b) + decoded_blob(c, raw) + decoded_blob(d, raw)
    (OUT / name / "expected.bin.zst").write_bytes(compress(bytes(buf)))


def write_decode(name, cases):
    ids, dec_f, dec_t = cases
    buf = bytearray(b"CTDEC001") + u32(len(ids))
    for a, c, d in zip(ids, dec_f, dec_t):
        buf += u32(len(a)) + u32s(a) + blob(c.encode("utf-8")) + blob(d.encode("utf-8"))
    (OUT / name / "decode.bin.zst").write_bytes(compress(bytes(buf)))


# ------------------------------------------------------------------------------------------------
# Checks that the texts reach each feature: switching the feature off changes HF's output
# ------------------------------------------------------------------------------------------------

def differs(name, tok, mutate, texts, what="encode"):
    d = as_json(tok)
    mutate(d)
    other = from_json(d)
    if what == "encode":
        a = [e.ids for e in tok.encode_batch(texts)]
        b = [e.ids for e in other.encode_batch(texts)]
    else:
        ids = [e.ids for e in tok.encode_batch(texts)]
        a = tok.decode_batch(ids, skip_special_tokens=False) + tok.decode_batch(ids, skip_special_tokens=True)
        b = other.decode_batch(ids, skip_special_tokens=False) + other.decode_batch(ids, skip_special_tokens=True)
    n = sum(x != y for x, y in zip(a, b))
    return n


def set_path(path, value):
    def mutate(d):
        node = d
        for k in path[:-1]:
            node = node[k]
        node[path[-1]] = value
    return mutate


def added_flag(content, flag, value):
    def mutate(d):
        for t in d["added_tokens"]:
            if t["content"] == content:
                t[flag] = value
    return mutate


FEATURES = {
    "gpt2": [("ByteLevel use_regex", set_path(["pre_tokenizer", "use_regex"], False), "encode"),
             ("<mask> lstrip", added_flag("<mask>", "lstrip", False), "encode"),
             ("<|sep|> rstrip", added_flag("<|sep|>", "rstrip", False), "encode")],
    "qwen2": [("NFC", set_path(["normalizer"], None), "encode"),
              ("Split isolated", set_path(["pre_tokenizer", "pretokenizers", 0, "behavior"], "Removed"), "encode"),
              ("(?i:'s...)", set_path(["pre_tokenizer", "pretokenizers", 0, "pattern", "Regex"],
                                      QWEN2_RE.replace("(?i:", "(?:")), "encode")],
    "llama3": [("ignore_merges", set_path(["model", "ignore_merges"], False), "encode"),
               ("\\p{N}{1,3}", set_path(["pre_tokenizer", "pretokenizers", 0, "pattern", "Regex"],
                                        LLAMA3_RE.replace(r"\p{N}{1,3}", r"\p{N}")), "encode")],
    "llama2": [("byte_fallback", set_path(["model", "byte_fallback"], False), "encode"),
               ("Prepend", set_path(["normalizer", "normalizers", 0, "prepend"], "_"), "encode"),
               ("decoder Strip", set_path(["decoder", "decoders", 3, "start"], 0), "decode"),
               ("decoder ByteFallback", set_path(["decoder", "decoders", 1], {"type": "Fuse"}), "decode")],
    "mistral": [("byte_fallback", set_path(["model", "byte_fallback"], False), "encode"),
                ("prepend_scheme first", set_path(["pre_tokenizer", "prepend_scheme"], "always"), "encode"),
                ("[INST] rstrip", added_flag("[INST]", "rstrip", False), "encode"),
                ("[/INST] lstrip", added_flag("[/INST]", "lstrip", False), "encode"),
                ("decoder prepend_scheme first", set_path(["decoder", "decoders", 1, "prepend_scheme"], "never"),
                 "decode")],
    "exotic": [("fuse_unk", set_path(["model", "fuse_unk"], True), "encode"),
               ("Strip normalizer", set_path(["normalizer", "normalizers", 2, "strip_right"], False), "encode"),
               ("Replace regex", set_path(["normalizer", "normalizers", 3, "content"], "      "), "encode"),
               ("Replace string", set_path(["normalizer", "normalizers", 4, "content"], "Q"), "encode"),
               ("Lowercase", set_path(["normalizer", "normalizers", 1], {"type": "NFC"}), "encode"),
               ("Digits individual", set_path(["pre_tokenizer", "pretokenizers", 0, "individual_digits"], False),
                "encode"),
               # No check of lstrip/rstrip here: the Strip normalizer runs on every piece between
               # added tokens, so the spaces they would take are gone anyway (gpt2 and mistral
               # check them).
               ("[MASK] single_word", added_flag("[MASK]", "single_word", False), "encode"),
               ("[NORM] normalized", added_flag("[NORM]", "normalized", False), "encode"),
               ("<Mask> normalized", added_flag("<Mask>", "normalized", False), "encode"),
               ("Ⅻ normalized", added_flag("Ⅻ", "normalized", False), "encode"),
               ("zap single_word", added_flag("zap", "single_word", False), "encode"),
               ("naïve café single_word", added_flag("naïve café", "single_word", False), "encode"),
               ("decoder Strip", set_path(["decoder", "decoders", 4, "start"], 0), "decode")],
    "split_removed_next": [
        ("behavior removed", set_path(["pre_tokenizer", "pretokenizers", 0, "behavior"], "Isolated"), "encode"),
        ("behavior merged_with_next", set_path(["pre_tokenizer", "pretokenizers", 1, "behavior"], "MergedWithPrevious"),
         "encode"),
        ("ByteLevel add_prefix_space", set_path(["pre_tokenizer", "pretokenizers", 2, "add_prefix_space"], False),
         "encode"),
        ("NFKD", set_path(["normalizer"], {"type": "NFD"}), "encode")],
    "split_contiguous_invert": [
        ("Digits", set_path(["pre_tokenizer", "pretokenizers", 0], {"type": "Sequence", "pretokenizers": []}),
         "encode"),
        ("invert removed", set_path(["pre_tokenizer", "pretokenizers", 1, "invert"], False), "encode"),
        ("behavior contiguous", set_path(["pre_tokenizer", "pretokenizers", 2, "behavior"], "Isolated"), "encode"),
        ("invert merged_with_previous", set_path(["pre_tokenizer", "pretokenizers", 3, "invert"], False), "encode"),
        ("NFD", set_path(["normalizer"], None), "encode")],
}


def check_features(name, tok, adv_texts, rec_adv):
    lines = []
    ids_t = rec_adv[0]
    seen = {i for ids in ids_t for i in ids}
    vocab = tok.get_vocab(with_added_tokens=True)
    for t in tok.get_added_tokens_decoder().values():
        assert vocab[t.content] in seen, f"{name}: added token {t.content!r} never matched"
    lines.append(f"all {len(tok.get_added_tokens_decoder())} added tokens matched")
    if name in ("llama2", "mistral"):
        byte_ids = {vocab[f"<0x{b:02X}>"] for b in range(256)}
        used = seen & byte_ids
        assert len(used) > 50, (name, len(used))
        lines.append(f"{len(used)} distinct byte-fallback tokens used")
    if name == "exotic":
        unk = vocab["[UNK]"]
        runs = sum(any(a == b == unk for a, b in zip(ids, ids[1:])) for ids in ids_t)
        assert runs > 0
        lines.append(f"[UNK] twice in a row in {runs} documents")
    for label, mutate, what in FEATURES[name]:
        n = differs(name, tok, mutate, adv_texts, what)
        assert n > 0, f"{name}: switching off {label} changes nothing"
        lines.append(f"{label}: {n} adversarial documents change without it ({what})")
    return lines


# ------------------------------------------------------------------------------------------------
# Read back
# ------------------------------------------------------------------------------------------------

class Reader:
    def __init__(self, data):
        self.data, self.pos = data, 0

    def take(self, n):
        b = self.data[self.pos:self.pos + n]
        assert len(b) == n
        self.pos += n
        return b

    def u32(self):
        return struct.unpack("<I", self.take(4))[0]

    def ids(self):
        n = self.u32()
        return list(struct.unpack(f"<{n}I", self.take(4 * n)))

    def blob(self, raw=None):
        n = self.u32()
        if n == SAME and raw is not None:
            return self.blob() + raw + self.blob()
        return self.take(n)

    def end(self):
        assert self.pos == len(self.data)


def read_back(docs, recs, decs):
    r = Reader(decompress((OUT / "texts.bin.zst").read_bytes()))
    assert r.take(8) == b"CTTXT001"
    assert r.u32() == len(docs)
    for s, raw in docs:
        assert r.take(1)[0] == s and r.blob() == raw
    r.end()
    texts = [hf_text(raw) for _, raw in docs]
    for name, rec in recs.items():
        r = Reader(decompress((OUT / name / "expected.bin.zst").read_bytes()))
        assert r.take(8) == EXPECTED_MAGIC and r.u32() == len(docs)
        for i, (_, raw) in enumerate(docs):
            assert r.ids() == rec[0][i] and r.ids() == rec[1][i]
            raw = raw if SAME_AS_TEXT else None
            assert r.blob(raw).decode("utf-8") == rec[2][i] and r.blob(raw).decode("utf-8") == rec[3][i]
        r.end()
        r = Reader(decompress((OUT / name / "decode.bin.zst").read_bytes()))
        assert r.take(8) == b"CTDEC001"
        cases, dec_f, dec_t = decs[name]
        assert r.u32() == len(cases)
        for i in range(len(cases)):
            assert r.ids() == cases[i]
            assert r.blob().decode("utf-8") == dec_f[i] and r.blob().decode("utf-8") == dec_t[i]
        r.end()
        # The file on disk, loaded afresh, gives the same with encode and decode one at a time.
        tok = Tokenizer.from_file(str(OUT / name / "tokenizer.json"))
        for i in range(len(docs)):
            assert tok.encode(texts[i]).ids == rec[0][i], (name, i)
            if i % 7 == 0:
                assert tok.encode(texts[i], add_special_tokens=False).ids == rec[1][i], (name, i)
                assert tok.decode(rec[0][i], skip_special_tokens=False) == rec[2][i], (name, i)
                assert tok.decode(rec[0][i], skip_special_tokens=True) == rec[3][i], (name, i)


# ------------------------------------------------------------------------------------------------

def main():
    OUT.mkdir(parents=True, exist_ok=True)
    for p in OUT.iterdir():  # everything this script writes; README.md stays
        if p.is_dir() and (p / "tokenizer.json").exists():
            shutil.rmtree(p)
        elif p.name in ("texts.bin.zst", "summary.json"):
            p.unlink()
    large, by_lang = large_set()
    adv = adversarial_set()
    docs = [(0, raw) for raw in large] + [(1, raw) for raw in adv]
    write_texts(docs)
    texts = [hf_text(raw) for _, raw in docs]
    adv_texts = texts[len(large):]
    en = by_lang["en"]
    multi = by_lang["de"][::2] + by_lang["ru"][::2] + by_lang["es"][::2]

    recs, decs, report = {}, {}, {}
    for name, make in TOKENIZERS.items():
        tok = make(en, multi)
        path = save(tok, name)
        tok = Tokenizer.from_file(str(path))
        rec = record(tok, texts)
        recs[name] = rec
        write_expected(name, rec, [raw for _, raw in docs])
        decs[name] = decode_cases(tok, rec[0][len(large):])
        write_decode(name, decs[name])
        adv_rec = tuple(x[len(large):] for x in rec)
        report[name] = check_features(name, tok, adv_texts, adv_rec)
        n_ids = sum(map(len, rec[0][:len(large)]))
        report[name].insert(0, f"vocab {tok.get_vocab_size(with_added_tokens=True)}, "
                               f"{n_ids} ids on the large set ({sum(map(len, large)) / n_ids:.2f} bytes/id)")
        print(name, *report[name], sep="\n  ", flush=True)

    read_back(docs, recs, decs)
    invalid = sum(1 for _, raw in docs if hf_text(raw).encode("utf-8") != raw)
    summary = {
        "tokenizers": tokenizers.__version__,
        "zstandard": zstandard.__version__,
        "large": {"documents": len(large), "bytes": sum(map(len, large))},
        "adversarial": {"documents": len(adv), "bytes": sum(map(len, adv)), "invalid_utf8": invalid},
        "notes": notes,
        "features": report,
    }
    (OUT / "summary.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    total = sum(p.stat().st_size for p in OUT.rglob("*") if p.is_file())
    print(json.dumps({k: summary[k] for k in ("tokenizers", "large", "adversarial")}), f"fixtures: {total} bytes")


if __name__ == "__main__":
    sys.exit(main())
