#!/usr/bin/env python3
"""Reference vectors for DeepSeek-V4.1's Engram hashing (tests/unit/model/engram_hash_test.cc,
tests/unit/tokenizer/token_texts_test.cc, tests/unit/tokenizer/compressed_vocab_test.cc).

Everything is computed here with the libraries the reference uses: numpy (the hash multipliers
come from numpy.random.default_rng) and Hugging Face `tokenizers` (the compressed token map is
built from `decode([id])` and tokenizers' normalizers). The layout and the row hash are written
out here from the reference's semantics (NeMo AutoModel 0.7.0 `deepseek_v41/engram.py`,
spec §6.7 item 2) with Python integers and numpy int64 arrays, independently of the C++ code.

Writes, under tests/data/engram/:
  numpy_rng.json        SeedSequence pools and states, PCG64 states and raw outputs, and
                        Generator.integers call sequences (32-bit and 64-bit Lemire paths, the
                        raw-draw edge cases, the kept 32-bit half across calls, rejections)
  layouts.json          primes, offsets, multipliers and rows of the released V4.1 config and of
                        small ones, and configs that must fail
  hash_rows.json        rows for sequences of compressed ids (DEAD positions included), and raw
                        V4 token ids through the real compressed map
  v4_map.txt            the real V4 tokenizer's compressed map: counts, FNV-1a hashes of the map
                        and of the decoded texts (whole and per block of 4096 ids), and, for
                        every token whose text is not plain ASCII and whose key appeared
                        before, the first id with that key
  unicode_steps.txt     per normalizer step and block of 4096 code points, an FNV-1a hash of
                        what HF does to each code point alone (only blocks where it changes one)
  normalize_cases.json  strings through the Engram normalizer and through each step
  tokenizers/*/tokenizer.json + tokenizers/*/expected.json
                        small tokenizers (WordLevel, Metaspace/Unigram, WordPiece, a
                        ByteFallback BPE, and one with id holes, reassigned and normalized added
                        tokens) with HF's len(), decode([id]), id_to_token(id) and compressed map
and rewrites the generated block of src/tokenizer/token_texts.cc (Rust's lowercase for code
points unassigned in this Python's Unicode version, which is the baseline for ICU's answers).

Run: python3 tests/reference/engram/make_engram_vectors.py [--tokenizer PATH]
(needs `pip install numpy tokenizers`; the V4 tokenizer defaults to
$DEEPINFER_SHARED_DIR or ../shared, then tokenizers/deepseek_v4/tokenizer.json).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import sys
import unicodedata

import numpy as np
import tokenizers
from tokenizers import Regex, Tokenizer, normalizers

REPO = pathlib.Path(__file__).resolve().parents[3]
DATA = REPO / "tests" / "data" / "engram"
INT64_MAX = (1 << 63) - 1
MASK64 = (1 << 64) - 1
BLOCK_IDS = 4096
BLOCK_CPS = 4096


def fnv1a(data: bytes, h: int = 0xCBF29CE484222325) -> int:
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & MASK64
    return h


def dump(path: pathlib.Path, obj, compact: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":")) if compact else \
        json.dumps(obj, ensure_ascii=False, indent=1)
    path.write_text(text + "\n", encoding="utf-8")


# --------------------------------------------------------------------------------------------
# numpy
# --------------------------------------------------------------------------------------------

def rng_vectors() -> dict:
    seeds = [0, 1, 10007, 10007 * 14, 123456789, (1 << 32) + 5, (1 << 40) + 123, (1 << 64) - 1]
    seqs = []
    for seed in seeds:
        ss = np.random.SeedSequence(seed)
        pcg = np.random.PCG64(seed)
        st = pcg.state["state"]
        seqs.append({
            "seed": str(seed),
            "pool": [int(x) for x in ss.pool],
            "state_u32": [int(x) for x in ss.generate_state(6, np.uint32)],
            "state_u64": [str(int(x)) for x in ss.generate_state(4, np.uint64)],
            "pcg_state": str(st["state"]),
            "pcg_inc": str(st["inc"]),
            "raw": [str(int(x)) for x in pcg.random_raw(5)],
        })
    # Generator.integers call sequences on one generator each: the order matters (a 32-bit
    # draw keeps the other half of its 64-bit output for the next 32-bit draw).
    calls = [(0, 10, 5), (0, 1 << 40, 3), (0, 7, 3), (-5, 5, 4), (0, 1 << 32, 3),
             (0, (1 << 32) + 1, 2), (-(1 << 63), INT64_MAX, 2), (5, 6, 2), (0, 1 << 62, 3),
             (0, 3 << 30, 16), (-(1 << 63), 1 << 62, 16), (0, 2, 9),
             (0, (INT64_MAX // 99092) // 2, 4), (0, (1 << 32) - 1, 3)]
    gens = []
    for seed in [0, 10007, 140098, 987654321]:
        g = np.random.default_rng(seed)
        out = []
        for low, high, size in calls:
            vals = g.integers(low, high, size=size, dtype=np.int64)
            out.append({"low": str(low), "high": str(high), "size": size,
                        "values": [str(int(v)) for v in vals]})
        gens.append({"seed": str(seed), "calls": out})
    return {"numpy": np.__version__, "seed_sequences": seqs, "generators": gens}


# --------------------------------------------------------------------------------------------
# Layout and hash (the reference's semantics, written out)
# --------------------------------------------------------------------------------------------

def is_prime(n: int) -> bool:
    if n < 2:
        return False
    if n % 2 == 0:
        return n == 2
    d = 3
    while d * d <= n:
        if n % d == 0:
            return False
        d += 2
    return True


def layout(cfg: dict) -> dict:
    n_max, heads, vc = cfg["max_ngram_size"], cfg["n_heads"], cfg["compressed_vocab_size"]
    seen: set[int] = set()
    bound = max(1, (INT64_MAX // vc) // 2)
    out = {"primes": [], "offsets": [], "multipliers": [], "rows": []}
    for layer_id, rows in zip(cfg["layer_ids"], cfg["num_embeddings"]):
        primes = []
        for _ in range(n_max - 1):
            current = cfg["vocab_size"] - 1
            for _ in range(heads):
                current += 1
                while not is_prime(current) or current in seen:
                    current += 1
                seen.add(current)
                primes.append(current)
        if sum(primes) > rows:
            raise ValueError(f"layer {layer_id} needs {sum(primes)} rows, has {rows}")
        offsets = [int(x) for x in np.cumsum([0, *primes[:-1]])]
        mult = np.random.default_rng(10007 * layer_id).integers(0, bound, size=(n_max,),
                                                                 dtype=np.int64) * 2 + 1
        out["primes"].append(primes)
        out["offsets"].append(offsets)
        out["multipliers"].append([str(int(m)) for m in mult])
        out["rows"].append(sum(primes))
    return out


def hash_rows(cfg: dict, lay: dict, compressed: list[int], pad: int) -> list:
    """[layer][position][column] for one sequence; -1 marks a DEAD position."""
    n_max, heads = cfg["max_ngram_size"], cfg["n_heads"]
    seq = np.array(compressed, dtype=np.int64)
    t = len(seq)
    out = []
    for j in range(len(cfg["layer_ids"])):
        mult = np.array([int(m) for m in lay["multipliers"][j]], dtype=np.int64)
        primes = np.array(lay["primes"][j], dtype=np.int64)
        offsets = np.array(lay["offsets"][j], dtype=np.int64)
        blocked = np.zeros(t, dtype=bool)
        toks = []
        for s in range(n_max):
            src = np.arange(t) - s
            val = seq[np.clip(src, 0, None)]
            blocked = blocked | (src < 0) | (val == -1)
            toks.append(np.where(blocked, pad, val))
        with np.errstate(over="ignore"):
            prods = np.stack(toks, axis=-1) * mult  # int64, wrapping
        rolling = prods[:, 0]
        cols = []
        for s in range(1, n_max):
            rolling = np.bitwise_xor(rolling, prods[:, s])
            p = primes[(s - 1) * heads:s * heads]
            cols.append(np.remainder(rolling[:, None], p[None, :]))  # floor mod, like torch %
        rows = np.concatenate(cols, axis=-1) + offsets
        out.append([[int(x) for x in r] for r in rows])
    return out


RELEASED = {"name": "released", "layer_ids": [1, 14], "num_embeddings": [384006168, 384016682],
            "max_ngram_size": 4, "n_heads": 8, "vocab_size": 16_000_000,
            "compressed_vocab_size": 99092}
TINY = {"name": "tiny", "layer_ids": [0, 3, 2], "num_embeddings": [500, 500, 500],
        "max_ngram_size": 3, "n_heads": 2, "vocab_size": 50, "compressed_vocab_size": 37}
BIG_VC = {"name": "big_vc", "layer_ids": [5], "num_embeddings": [10_000],
          "max_ngram_size": 2, "n_heads": 3, "vocab_size": 1000,
          "compressed_vocab_size": 1 << 30}  # bound < 2^32: the 32-bit draw path


def layout_vectors() -> tuple[dict, dict]:
    cfgs = []
    lays = {}
    for cfg in (RELEASED, TINY, BIG_VC):
        lay = layout(cfg)
        lays[cfg["name"]] = lay
        cfgs.append({**cfg, **lay})
    # The exact row count passes; one row fewer must fail and name both numbers.
    exact = {**TINY, "name": "tiny_exact", "num_embeddings": lays["tiny"]["rows"]}
    cfgs.append({**exact, **layout(exact)})
    failing = [
        {**TINY, "name": "too_few_rows",
         "num_embeddings": [lays["tiny"]["rows"][0], lays["tiny"]["rows"][1] - 1, 500],
         "error": str(lays["tiny"]["rows"][1] - 1)},
        {**TINY, "name": "repeated_layer", "layer_ids": [0, 3, 3], "error": "repeats"},
        {**TINY, "name": "n1", "max_ngram_size": 1, "error": "engram_max_ngram_size"},
        {**TINY, "name": "no_heads", "n_heads": 0, "error": "engram_n_heads"},
        {**TINY, "name": "count_mismatch", "num_embeddings": [500, 500], "error": "one per layer"},
        {**TINY, "name": "no_layers", "layer_ids": [], "num_embeddings": [], "error": "empty"},
    ]
    return {"configs": cfgs, "failing": failing}, lays


def hash_vectors(lays: dict, v4_map: list[int] | None) -> dict:
    cases = []
    tiny_seqs = [[5], [5, 6], [1, 2, 3, 4, 5, 6, 7], [36, 0, 36, 0, 36, 0],
                 [3, -1, 4, 5, 6, -1, -1, 7, 8], [-1, 2, 3]]
    for seq in tiny_seqs:
        for pad in (0, 7):
            cases.append({"config": "tiny", "pad": pad, "compressed": seq,
                          "rows": hash_rows(TINY, lays["tiny"], seq, pad)})
    # Ids beyond V_c never come from a real map, but make the products wrap and the rolling
    # hash negative: the row is then torch's floor mod, not C's remainder.
    big = [2147483647, 1000000007, 123456789, 2147483646, 99999989]
    cases.append({"config": "tiny", "pad": 3, "compressed": big,
                  "rows": hash_rows(TINY, lays["tiny"], big, 3)})
    rel_seqs = [[0, 1, 2, 3, 4, 5], [99091, 99090, 99089, 99091, 99090], [17, -1, 17, 17, 17],
                list(range(40000, 40016))]
    for seq in rel_seqs:
        cases.append({"config": "released", "pad": 2, "compressed": seq,
                      "rows": hash_rows(RELEASED, lays["released"], seq, 2)})
    cases.append({"config": "big_vc", "pad": 1, "compressed": [0, 5, 123456, (1 << 30) - 3],
                  "rows": hash_rows(BIG_VC, lays["big_vc"], [0, 5, 123456, (1 << 30) - 3], 1)})
    out = {"cases": cases}
    if v4_map is not None:
        raw = [0, 19923, 14, 2058, 128803, 300, 129279, 1, 33, 33, 201, 2, 5, 128799, 40000]
        comp = [v4_map[i] for i in raw]
        comp_dead = [c if i != 129279 else -1 for i, c in zip(raw, comp)]  # the image token DEAD
        out["v4_raw"] = {"token_ids": raw, "pad_token_id": 2, "pad": v4_map[2],
                         "compressed": comp, "dead_token_id": 129279,
                         "rows": hash_rows(RELEASED, lays["released"], comp_dead, v4_map[2])}
    return out


# --------------------------------------------------------------------------------------------
# Tokenizers and normalizers
# --------------------------------------------------------------------------------------------

SENTINEL = "\ue000"


def engram_normalizer():
    return normalizers.Sequence([
        normalizers.NFKC(), normalizers.NFD(), normalizers.StripAccents(), normalizers.Lowercase(),
        normalizers.Replace(Regex(r"[ \t\r\n]+"), " "), normalizers.Replace(Regex(r"^ $"), SENTINEL),
        normalizers.Strip(), normalizers.Replace(SENTINEL, " "),
    ])


def compressed_map(tok: Tokenizer, size: int) -> tuple[list[int], int, list[str]]:
    norm = engram_normalizer()
    key_to_id: dict = {}
    out, texts = [], []
    for i in range(size):
        text = tok.decode([i], skip_special_tokens=False)
        texts.append(text)
        if "\ufffd" in text:
            key = tok.id_to_token(i)
        else:
            n = norm.normalize_str(text)
            key = n if n else text
        if key not in key_to_id:
            key_to_id[key] = len(key_to_id)
        out.append(key_to_id[key])
    return out, len(key_to_id), texts


def v4_map_file(path: str) -> list[int]:
    tok = Tokenizer.from_file(path)
    size = tok.get_vocab_size(with_added_tokens=True)  # transformers' len(tokenizer)
    m, count, texts = compressed_map(tok, size)
    text_hash = fnv1a(b"".join(t.encode() + b"\0" for t in texts))
    lines = ["# The DeepSeek-V4 tokenizer's Engram compressed map (make_engram_vectors.py)",
             f"# tokenizers {tokenizers.__version__}; FNV-1a 64 over the map as int32 LE and over",
             "# each text followed by a NUL byte; blocks of 4096 ids: block map_hash text_hash;",
             "# then, for each non-ASCII text whose key appeared before (ascending ids):",
             "# id - previous such id (the first counts from 0), the first id with the same key",
             f"size {size}", f"count {count}", f"map {fnv1a(np.array(m, '<i4').tobytes()):016x}",
             f"texts {text_hash:016x}"]
    non_ascii = [i for i in range(size) if not texts[i].isascii()]
    lines.append(f"non_ascii {len(non_ascii)} {fnv1a(np.array(non_ascii, '<i4').tobytes()):016x}")
    for b in range(0, size, BLOCK_IDS):
        mh = fnv1a(np.array(m[b:b + BLOCK_IDS], "<i4").tobytes())
        th = fnv1a(b"".join(t.encode() + b"\0" for t in texts[b:b + BLOCK_IDS]))
        lines.append(f"block {b // BLOCK_IDS} {mh:016x} {th:016x}")
    first: dict[int, int] = {}
    for i, c in enumerate(m):
        first.setdefault(c, i)
    prev = 0
    for i in non_ascii:
        if first[m[i]] != i:
            lines.append(f"{i - prev} {first[m[i]]}")
            prev = i
    (DATA / "v4_map.txt").write_text("\n".join(lines) + "\n")
    print(f"V4: {size} ids, {count} compressed ids, {len(non_ascii)} non-ASCII texts")
    return m


def single_steps() -> dict:
    return {"nfc": normalizers.NFC(), "nfd": normalizers.NFD(), "nfkc": normalizers.NFKC(),
            "nfkd": normalizers.NFKD(), "lowercase": normalizers.Lowercase(),
            "strip_accents": normalizers.StripAccents(), "strip": normalizers.Strip(),
            "engram": engram_normalizer()}


def unicode_steps_file() -> None:
    lines = ["# HF normalizers on each code point alone (make_engram_vectors.py): step block count",
             "# hash; FNV-1a 64 over 'XXXX:<output UTF-8>;' (hex code point) for the code points",
             "# of the block the step changes; blocks not listed change none"]
    for name, n in single_steps().items():
        blocks: dict[int, list] = {}
        for cp in range(0x110000):
            if 0xD800 <= cp <= 0xDFFF:
                continue
            c = chr(cp)
            r = n.normalize_str(c)
            if r != c:
                blocks.setdefault(cp // BLOCK_CPS, []).append(f"{cp:X}:".encode() + r.encode() + b";")
        for b, parts in sorted(blocks.items()):
            lines.append(f"{name} {b} {len(parts)} {fnv1a(b''.join(parts)):016x}")
    (DATA / "unicode_steps.txt").write_text("\n".join(lines) + "\n")


def lowercase_delta() -> None:
    low = normalizers.Lowercase()
    delta = []
    for cp in range(0x80, 0x110000):
        if 0xD800 <= cp <= 0xDFFF or unicodedata.category(chr(cp)) != "Cn":
            continue
        r = low.normalize_str(chr(cp))
        if r != chr(cp):
            if len(r) != 1:
                sys.exit(f"U+{cp:04X} lowercases to {len(r)} code points: extend LowerDelta")
            delta.append((cp, ord(r)))
    base = unicodedata.unidata_version
    major, minor = (int(x) for x in base.split(".")[:2])
    block = ["// BEGIN GENERATED by tests/reference/engram/make_engram_vectors.py: do not edit by hand.",
             "// clang-format off",
             f"// Rust's char::to_lowercase (HF Lowercase) for code points unassigned in Unicode {base}",
             f"// whose lowercase differs from themselves; ICU answers for every code point assigned in {major}.{minor}.",
             f"constexpr int kLowerBaseMajor = {major};", f"constexpr int kLowerBaseMinor = {minor};",
             "constexpr LowerDelta kLowerDelta[] = {"]
    block += [f"    {{0x{a:X}, 0x{b:X}}}," for a, b in delta] or ["    {0x0, 0x0},"]
    block += ["};", "// clang-format on", "// END GENERATED"]
    src = REPO / "src" / "tokenizer" / "token_texts.cc"
    text = src.read_text()
    new = re.sub(r"// BEGIN GENERATED.*?// END GENERATED", lambda _: "\n".join(block), text,
                 flags=re.S)
    src.write_text(new)
    print(f"lowercase delta: {len(delta)} code points above Unicode {base}")


NORMALIZE_CASES = [
    "", " ", "  ", "\t", "\n", " \n ", "a", " The", "THE", "the ", "  Hello   World  ", "Ünïcödé",
    "ﬁnal", "Ⅻ", "①②", "ＡＢＣ", "ｶﾀｶﾅ", "가각", "각", "İstanbul", "ΣΊΣΥΦΟΣ", "ß", "ẞ", "Å",
    "e\u0301", "\u0301", "a\u0328\u0301", "x\u20dd", "\u0903a", "\u1cf2", "\U000111c9", "\u3000x\u3000",
    "\u00a0a\u00a0", "a\u2028b", "\u200b", "\ufeff", "\ue000", " \ue000 ", "a\ue000b",
    "\r\n", "\u0085", "ǅ", "Ⓐ", "㎏", "…", "ℌ", "\U0001d400", "\U0001e900", "\U00010d50",
    "\u1c89", "A\u0338", "\u0130", "Dž", "ﷺ", "\u0345", "ΐ", "\U0001f600", "x\u034fy", "\u093f",
    "\u0f73", "\uac00\u11a8", "\u2126", "\u212b", "\u1e9b\u0323", "\t\tA\t\t",
]


def normalize_cases() -> dict:
    steps = single_steps()
    cases = []
    for s in NORMALIZE_CASES:
        cases.append({"input": s, **{k: n.normalize_str(s) for k, n in steps.items()}})
    return {"cases": cases}


# --------------------------------------------------------------------------------------------
# Small tokenizers
# --------------------------------------------------------------------------------------------

def added(content, id_, special=False, normalized=None):
    return {"id": id_, "content": content, "single_word": False, "lstrip": False,
            "rstrip": False, "normalized": (not special) if normalized is None else normalized,
            "special": special}


def tok_json(model, added_tokens=(), normalizer=None, decoder=None, pre_tokenizer=None):
    return {"version": "1.0", "truncation": None, "padding": None,
            "added_tokens": list(added_tokens), "normalizer": normalizer,
            "pre_tokenizer": pre_tokenizer, "post_processor": None, "decoder": decoder,
            "model": model}


VARIANT_WORDS = ["the", "The", "THE", " the", " The", "thé", "THÉ", "ｔｈｅ", "the ", "\tthe",
                 "naïve", "naive", "NAÏVE", "ﬁ", "fi", "Ⅸ", "ix", "IX", " ", "  ", "\n", "\t",
                 "", "ß", "SS", "ss", "Σ", "σ", "ς", "İ", "i̇", "ǅ", "dž", "①", "1", "ⓐ", "a",
                 "Å", "Å", "å", "\u3000", "x\u3000", "\ue000", "é", "é"]


def small_tokenizers() -> list[tuple[str, dict]]:
    out = []
    # WordLevel, no decoder: the token string is the text.
    vocab = {"[UNK]": 0}
    for w in VARIANT_WORDS:
        if w and w not in vocab:
            vocab[w] = len(vocab)
    wl = tok_json({"type": "WordLevel", "vocab": vocab, "unk_token": "[UNK]"},
                  [added("[UNK]", 0, special=True), added("<s>", len(vocab), special=True),
                   added("Hello World", len(vocab) + 1)])
    out.append(("wordlevel", wl))

    # Unigram with a Metaspace decoder (SentencePiece style), ▁ for spaces.
    pieces = [["<unk>", 0.0]]
    for w in VARIANT_WORDS:
        p = w.replace(" ", "▁")
        if p and [p, -1.0] not in pieces:
            pieces.append([p, -1.0])
    for w in ["▁the", "▁The", "▁THÉ", "▁", "▁▁", "the▁", "▁ｔｈｅ▁", "▁naïve", "▁a▁b"]:
        pieces.append([w, -2.0])
    ms = tok_json({"type": "Unigram", "unk_id": 0, "vocab": pieces, "byte_fallback": False},
                  [added("<unk>", 0, special=True), added("</s>", len(pieces), special=True)],
                  normalizer={"type": "Sequence", "normalizers": [
                      {"type": "Prepend", "prepend": "▁"},
                      {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]},
                  pre_tokenizer={"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always",
                                 "split": True},
                  decoder={"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always",
                           "split": True})
    out.append(("metaspace", ms))

    # WordPiece with its decoder (cleanup on).
    wp_vocab = {"[UNK]": 0, "[CLS]": 1, "the": 2, "##the": 3, "The": 4, "##é": 5, " .": 6,
                ".": 7, "##s": 8, " 's": 9, "don": 10, " do not": 11, "##": 12, "é": 13}
    wp = tok_json({"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                   "max_input_chars_per_word": 100, "vocab": wp_vocab},
                  [added("[CLS]", 1, special=True)],
                  normalizer={"type": "BertNormalizer", "clean_text": True,
                              "handle_chinese_chars": True, "strip_accents": None,
                              "lowercase": True},
                  decoder={"type": "WordPiece", "prefix": "##", "cleanup": True})
    out.append(("wordpiece", wp))

    # BPE with byte fallback and the Llama-style decoder sequence.
    bf_vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for b in range(256):
        bf_vocab[f"<0x{b:02X}>"] = len(bf_vocab)
    for w in ["▁the", "▁The", "the", "▁", "▁▁", "é", "▁ÉTÉ", "<0x4>", "<0x+A>", "<0xZZ>", "<0xé>"]:
        bf_vocab.setdefault(w, len(bf_vocab))
    bf = tok_json({"type": "BPE", "dropout": None, "unk_token": "<unk>",
                   "continuing_subword_prefix": None, "end_of_word_suffix": None,
                   "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                   "vocab": bf_vocab, "merges": []},
                  [added("<unk>", 0, special=True), added("<s>", 1, special=True),
                   added("</s>", 2, special=True), added("▁Added", len(bf_vocab))],
                  normalizer={"type": "Sequence", "normalizers": [
                      {"type": "Prepend", "prepend": "▁"},
                      {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]},
                  decoder={"type": "Sequence", "decoders": [
                      {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
                      {"type": "ByteFallback"}, {"type": "Fuse"},
                      {"type": "Strip", "content": " ", "start": 1, "stop": 0}]})
    out.append(("bytefallback", bf))

    # Byte-level BPE with id holes, added tokens whose file ids disagree with the library's,
    # a repeated added token, and normalized added tokens under a Lowercase normalizer.
    bl_vocab = {"a": 0, "b": 1, "Ġa": 2, "ĠB": 3, "âĢ": 4, "ðŁĺ": 6, "Ã©": 9}
    bl = tok_json({"type": "BPE", "dropout": None, "unk_token": None,
                   "continuing_subword_prefix": None, "end_of_word_suffix": None,
                   "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                   "vocab": bl_vocab, "merges": []},
                  [added("<|x|>", 20, special=True), added("ĠUp", 21), added("Ġa", 2),
                   added("<|x|>", 20, special=True), added("KEEP", 30, normalized=False),
                   added("", 31), added("Ã©X", 32)],
                  normalizer={"type": "Sequence", "normalizers": [{"type": "Lowercase"}]},
                  decoder={"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                           "use_regex": True})
    out.append(("edge_bytelevel", bl))
    return out


def small_tokenizer_files() -> None:
    for name, j in small_tokenizers():
        d = DATA / "tokenizers" / name
        d.mkdir(parents=True, exist_ok=True)
        (d / "tokenizer.json").write_text(json.dumps(j, ensure_ascii=False) + "\n",
                                          encoding="utf-8")
        tok = Tokenizer.from_file(str(d / "tokenizer.json"))
        size = tok.get_vocab_size(with_added_tokens=True)
        m, count, texts = compressed_map(tok, size)
        dump(d / "expected.json", {
            "size": size, "count": count, "map": m, "texts": texts,
            "tokens": [tok.id_to_token(i) for i in range(size)]}, compact=True)
        print(f"{name}: {size} ids, {count} compressed ids")


def main() -> int:
    ap = argparse.ArgumentParser()
    shared = os.environ.get("DEEPINFER_SHARED_DIR", str(REPO.parent / "shared"))
    ap.add_argument("--tokenizer", default=os.path.join(shared, "tokenizers", "deepseek_v4",
                                                        "tokenizer.json"))
    args = ap.parse_args()
    DATA.mkdir(parents=True, exist_ok=True)
    dump(DATA / "numpy_rng.json", rng_vectors(), compact=True)
    layouts, lays = layout_vectors()
    dump(DATA / "layouts.json", layouts)
    v4 = v4_map_file(args.tokenizer)
    dump(DATA / "hash_rows.json", hash_vectors(lays, v4), compact=True)
    unicode_steps_file()
    dump(DATA / "normalize_cases.json", normalize_cases())
    small_tokenizer_files()
    lowercase_delta()
    return 0


if __name__ == "__main__":
    sys.exit(main())
