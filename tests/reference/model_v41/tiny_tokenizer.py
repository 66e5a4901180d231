"""The tiny WordLevel tokenizer shared by the V4.1 test checkpoints (tests/data/model/v41_tokenizer/).

Only its vocabulary matters (prompts are token ids): the Engram compressed-token map is built by decoding every
id and normalising it (NFKC, NFD, strip accents, lowercase, collapse whitespace, strip; spec §5 and §6.7 item 2).
The vocabulary is chosen so that this map really merges ids: case variants ("The" / "the" / "THE"), leading-space
variants (" the"), accents ("café" / "cafe"), NFKC folds (full-width "ｔｈｅ", ligature "ﬁ"), whitespace tokens
(" ", "\\n", "  ", "\\t" all map to " "), a lone combining accent (normalises to "" and keeps its own text), and
tokens holding U+FFFD (keyed by their raw token string). Ids 0/1/2 are the special bos/eos/pad tokens.

The table has exactly VOCAB_SIZE entries, so the model vocabulary equals the tokenizer's size: NeMo's Engram hash
rejects ids outside the tokenizer, and a greedy continuation could otherwise produce one.
"""

from __future__ import annotations

import pathlib

VOCAB_SIZE = 320
SPECIALS = ["<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜▁pad▁｜>"]

BASE_WORDS = [
    "the", "of", "and", "to", "in", "is", "it", "that", "for", "on", "was", "with", "as", "at", "be", "by",
    "this", "from", "or", "an", "are", "not", "but", "all", "we", "can", "one", "has", "more", "new", "will",
    "time", "day", "way", "man", "sea", "sky", "red", "run", "sun",
]
ACCENTED = [
    "café", "cafe", "Café", "CAFÉ", " café", "naïve", "naive", " naïve", "résumé", "resume", "Résumé",
    "über", "uber", "Über", "señor", "senor", "élan", "elan", "façade", "facade", "crème", "creme", "Crème",
    "é", "e", "ñ",
]
NFKC_FORMS = [
    "ｔｈｅ", "ＴＨＥ", "Ｔｈｅ", "ａ", "Ａ", "ｃａｔ", "cat", "Cat", "１", "１２", "12", "ﬁ", "fi", "ﬂ", "fl",
    "ﬁne", "fine", "ﬂow", "flow", "ﬀ", "ff", "ﬁle", "file", "™", "tm", "½", "1⁄2",
]
WHITESPACE = [" ", "  ", "   ", "\n", "\n\n", "\t", " \n", "\r\n", " \t "]
ODD = ["\ufffd", "ab\ufffd", "\u0301", "\u0308", "<noise>"]
PUNCT = [".", ",", "!", "?", ";", ":", "'", '"', "(", ")", "-", " .", " ,", "0", "1", "2", "3", "4", "5",
         "6", "7", "8", "9"]


def vocabulary() -> list[str]:
    toks: list[str] = list(SPECIALS)
    seen = set(toks)

    def add(t: str) -> None:
        if t not in seen:
            seen.add(t)
            toks.append(t)

    for t in ODD[-1:]:  # "<noise>" at id 3: the DSpark noise token of config a
        add(t)
    for w in BASE_WORDS:
        for v in (w, w.capitalize(), w.upper(), " " + w, " " + w.capitalize()):
            add(v)
    for group in (ACCENTED, NFKC_FORMS, WHITESPACE, ODD[:-1], PUNCT):
        for t in group:
            add(t)
    k = 0
    while len(toks) < VOCAB_SIZE:  # filler: pairs that merge ("zq7" / "Zq7")
        for v in (f"zq{k}", f"Zq{k}"):
            if len(toks) < VOCAB_SIZE:
                add(v)
        k += 1
    assert len(toks) == VOCAB_SIZE, len(toks)
    return toks


def build(path: pathlib.Path) -> None:
    """Writes tokenizer.json (deterministic)."""
    from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers

    vocab = {t: i for i, t in enumerate(vocabulary())}
    tk = Tokenizer(models.WordLevel(vocab=vocab, unk_token=SPECIALS[2]))
    tk.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tk.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in SPECIALS])
    path.parent.mkdir(parents=True, exist_ok=True)
    tk.save(str(path), pretty=True)
