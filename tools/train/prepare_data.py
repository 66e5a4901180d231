"""Training corpus of the embedded default model (issue 7): real English text from Debian packages.

Two stages, both deterministic (no randomness beyond a content hash):

    # 1. text: extract, clean, deduplicate and split into train / held-out validation documents
    apt-get install bible-kjv bible-kjv-text dict-gcide wordnet-base
    python3 tools/train/prepare_data.py text
    # 2. (after tools/train/train_tokenizer.py) encode both splits into uint16 token files
    python3 tools/train/prepare_data.py encode

Sources (licences in models/default/DATA.md):
  * King James Bible (bible-kjv-text, read through the `bible` program of bible-kjv): one document per chapter.
  * GCIDE, the GNU Collaborative International Dictionary of English (dict-gcide, mostly Webster's 1913):
    one document per entry, pronunciation/markup stripped.
  * WordNet 3.0 glosses (wordnet-base): one document per synset, "word, word (noun): gloss".

Outputs under data/default_model/ (git-ignored; the lead carries data/default_model/tokens to the GPU):
  text/train.txt, text/val.txt   documents separated by a line holding only DOC_SEP
  tokens/train.bin, tokens/val.bin  uint16 ids, each document as BOS ids EOS, documents concatenated
  tokens/meta.json               counts and the tokenizer hash the ids belong to

The split is by a hash of the cleaned document, so it does not depend on the order of the sources; the
validation share is about 1 % of the documents. Dedup drops exact repeats after whitespace/case folding
(GCIDE has many identical short entries).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import pathlib
import re
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parents[2]
DATA = REPO / "data" / "default_model"
DOC_SEP = "\x1e"  # ASCII record separator on its own line; never occurs in the sources
VAL_PER_MILLE = 10
BOS_ID, EOS_ID = 0, 1


# ---------------------------------------------------------------------------------------------------------
# Sources

def kjv_docs() -> list[str]:
    out = subprocess.run(["bible", "-l100000", "Gen1:1-Rev22:21"], capture_output=True, text=True, check=True)
    docs, cur = [], []
    for line in out.stdout.splitlines():
        s = line.strip()
        if not s:
            continue
        m = re.match(r"^(\d+) (.*)$", s)
        if m:
            cur.append(m.group(2))
        else:  # chapter heading such as "Genesis 1"
            if len(cur) > 1:
                docs.append("\n".join(cur))
            cur = [s]
    if len(cur) > 1:
        docs.append("\n".join(cur))
    return docs


_PRON = re.compile(r"\\[^\\\n]*\\")
_BRACKET = re.compile(r"\[[^\]]*\]")
_CITE = re.compile(r"\s--[A-Z][\w. ]*\.?(?=\s|$)")


def gcide_docs(path="/usr/share/dictd/gcide.dict.dz") -> list[str]:
    text = gzip.open(path, "rt", encoding="utf-8", errors="replace").read()
    docs = []
    for block in re.split(r"\n\s*\n(?=\S)", text):  # entries start at column 0
        lines = [ln.strip() for ln in block.splitlines() if ln.strip()]
        if not lines or lines[0].startswith("00-database"):
            continue
        body = " ".join(lines)
        body = _PRON.sub("", body)            # \Ab`di*ca"tion\  pronunciation
        body = _BRACKET.sub("", body)         # [1913 Webster], etymologies, [R.], [Obs.]
        body = _CITE.sub("", body)            # --Bailey.  author citations
        body = body.replace("`", "'").replace("\"", "\"")
        body = re.sub(r"\s+", " ", body).strip()
        body = re.sub(r"\s+([,.;:])", r"\1", body)
        body = re.sub(r",\s*,", ",", body)
        if len(body) < 24 or len(body.split()) < 5:
            continue
        docs.append(body)
    return docs


_POS = {"n": "noun", "v": "verb", "a": "adjective", "s": "adjective", "r": "adverb"}


def wordnet_docs(root="/usr/share/wordnet") -> list[str]:
    docs = []
    for part in ("noun", "verb", "adj", "adv"):
        for line in open(f"{root}/data.{part}", encoding="utf-8", errors="replace"):
            if line.startswith("  ") or "|" not in line:
                continue  # licence header
            head, gloss = line.split("|", 1)
            f = head.split()
            n = int(f[3], 16)
            words = [f[4 + 2 * i].replace("_", " ") for i in range(n)]
            words = [re.sub(r"\([a-z]+\)$", "", w) for w in words]  # adjective markers such as (a)
            gloss = gloss.strip()
            if not gloss:
                continue
            docs.append(f"{', '.join(words)} ({_POS[f[2]]}): {gloss}")
    return docs


# ---------------------------------------------------------------------------------------------------------

def norm_key(doc: str) -> str:
    return hashlib.sha1(re.sub(r"\s+", " ", doc.lower()).strip().encode()).hexdigest()


def is_val(doc: str) -> bool:
    return int(hashlib.sha256(doc.encode()).hexdigest()[:8], 16) % 1000 < VAL_PER_MILLE


def stage_text(args) -> None:
    sources = {"kjv": kjv_docs(), "gcide": gcide_docs(), "wordnet": wordnet_docs()}
    if args.max_docs:  # smoke runs: an evenly spaced subset of every source
        sources = {k: v[:: max(1, len(v) // args.max_docs)][: args.max_docs] for k, v in sources.items()}
    seen, split = set(), {"train": [], "val": []}
    stats = {}
    for name, docs in sources.items():
        kept = 0
        for d in docs:
            d = d.replace(DOC_SEP, " ").strip()
            k = norm_key(d)
            if k in seen:
                continue
            seen.add(k)
            kept += 1
            split["val" if is_val(d) else "train"].append(d)
        stats[name] = {"documents": len(docs), "kept_after_dedup": kept,
                       "chars": sum(len(d) for d in docs)}
    out = pathlib.Path(args.data_dir) / "text"
    out.mkdir(parents=True, exist_ok=True)
    for s, docs in split.items():
        (out / f"{s}.txt").write_text(f"\n{DOC_SEP}\n".join(docs) + "\n", encoding="utf-8")
        stats[s] = {"documents": len(docs), "chars": sum(len(d) for d in docs)}
    (out / "stats.json").write_text(json.dumps(stats, indent=1) + "\n")
    print(json.dumps(stats, indent=1))


def read_docs(path: pathlib.Path) -> list[str]:
    return [d.strip() for d in path.read_text(encoding="utf-8").split(f"\n{DOC_SEP}\n") if d.strip()]


def stage_encode(args) -> None:
    import numpy as np
    from tokenizers import Tokenizer

    tok_path = pathlib.Path(args.tokenizer)
    tok = Tokenizer.from_file(str(tok_path))
    assert tok.token_to_id("<｜begin▁of▁sentence｜>") == BOS_ID and tok.token_to_id("<｜end▁of▁sentence｜>") == EOS_ID
    out = pathlib.Path(args.data_dir) / "tokens"
    out.mkdir(parents=True, exist_ok=True)
    meta = {"tokenizer_sha256": hashlib.sha256(tok_path.read_bytes()).hexdigest(),
            "vocab_size": tok.get_vocab_size(), "format": "uint16 little-endian; BOS doc EOS, concatenated"}
    for split in ("train", "val"):
        docs = read_docs(pathlib.Path(args.data_dir) / "text" / f"{split}.txt")
        ids = []
        for enc in tok.encode_batch(docs, add_special_tokens=False):
            ids.append(BOS_ID)
            ids.extend(enc.ids)
            ids.append(EOS_ID)
        arr = np.asarray(ids, dtype=np.uint16)
        assert arr.max() < meta["vocab_size"]
        if split == "train" and args.max_train_mb and arr.nbytes > args.max_train_mb * 1e6:
            # keep whole documents: cut at the last EOS before the limit
            lim = int(args.max_train_mb * 1e6 // 2)
            cut = int(np.nonzero(arr[:lim] == EOS_ID)[0][-1]) + 1
            print(f"train: {arr.size} tokens > {args.max_train_mb} MB, truncated to {cut}")
            arr = arr[:cut]
        arr.tofile(out / f"{split}.bin")
        meta[split] = {"documents": len(docs), "tokens": int(arr.size), "bytes": int(arr.nbytes),
                       "chars": sum(len(d) for d in docs)}
    (out / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    print(json.dumps(meta, indent=1))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="stage", required=True)
    t = sub.add_parser("text", help="extract, clean, dedup, split")
    t.add_argument("--max-docs", type=int, default=0, help="per source, for smoke runs (0: all)")
    e = sub.add_parser("encode", help="tokenize both splits to uint16 files")
    e.add_argument("--tokenizer", default=str(REPO / "models" / "default" / "tokenizer.json"))
    e.add_argument("--max-train-mb", type=float, default=25.0)
    for p in (t, e):
        p.add_argument("--data-dir", default=str(DATA))
    args = ap.parse_args(argv)
    {"text": stage_text, "encode": stage_encode}[args.stage](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
