#!/usr/bin/env python3
"""Reference token ids for the C++ tokenizer tests (tests/unit/tokenizer/).

What it writes, under tests/data/tokenizer/:
  corpus.bin         the documents (names + raw bytes; some are deliberately invalid UTF-8)
  tiny_flags/tokenizer.json, tiny_gpt2/tokenizer.json
                     small tokenizers cut from the real one (3000 merges) with added tokens that
                     use lstrip / rstrip / single_word / normalized / special; tiny_gpt2 uses
                     ByteLevel(use_regex=True), i.e. GPT-2's regex
  reference_ids_tiny_*.bin  their ids, same format, for the short documents only
  reference_ids.bin  for every document, the ids the Hugging Face `tokenizers` package gives
                     with special tokens recognised (allow_special=True) and, for the
                     documents whose name starts with "special/", also with
                     `encode_special_tokens = True` (our allow_special=False)

Usage:
  python3 tests/reference/tokenizer/make_vectors.py                   # ids for the committed corpus
  python3 tests/reference/tokenizer/make_vectors.py --rebuild-corpus  # gather the corpus anew
  options: --tokenizer PATH (default: $DEEPINFER_SHARED_DIR or ../shared, then
           tokenizers/deepseek_v4/tokenizer.json), --out DIR

The corpus is committed: rebuilding it reads machine files (/usr/share/common-licenses,
Python's stdlib and test/cjkencodings, Debian docs) that another machine may lack, plus text
written here and random text from a fixed seed. Ids are always recomputed with
`tokenizers.Tokenizer.from_file` (never transformers.AutoTokenizer, see shared/.../SOURCE.md).

Invalid UTF-8: a document's bytes are turned into text with Python's
`bytes.decode("utf-8", errors="replace")` (each maximal invalid subsequence -> U+FFFD), which is
the behaviour the C++ tokenizer documents; HF then encodes that string.

Binary formats (all integers little-endian):
  corpus.bin:        b"DITKCORP" u32 version=1 u32 n_docs, then per document:
                     u32 name_len, name (UTF-8), u32 text_len, text bytes
  reference_ids.bin: b"DITKIDS1" u32 n_docs, then per document:
                     u32 n, n x i32 (allow_special=True);
                     u32 m, m x i32 (allow_special=False);
                     a count of 0xFFFFFFFF means "not stored" (no ids follow)
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import pathlib
import random
import struct
import sys

REPO = pathlib.Path(__file__).resolve().parents[3]
DATA = REPO / "tests" / "data" / "tokenizer"
NOT_STORED = 0xFFFFFFFF


# --------------------------------------------------------------------------------------------
# Corpus
# --------------------------------------------------------------------------------------------

def _read(path: str, limit: int | None = None) -> bytes | None:
    try:
        data = pathlib.Path(path).read_bytes()
    except OSError:
        return None
    return data[:limit] if limit else data


def _cut_utf8(data: bytes, limit: int) -> bytes:
    """Cuts at a character boundary at most `limit` bytes in."""
    if len(data) <= limit:
        return data
    cut = limit
    while cut > 0 and (data[cut] & 0xC0) == 0x80:
        cut -= 1
    return data[:cut]


def file_documents() -> list[tuple[str, bytes]]:
    docs = []
    py = pathlib.Path(sys.base_prefix) / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}"
    sources = [
        ("prose/gpl-3", "/usr/share/common-licenses/GPL-3", 40000),
        ("prose/apache-2.0", "/usr/share/common-licenses/Apache-2.0", None),
        ("prose/mpl-2.0", "/usr/share/common-licenses/MPL-2.0", None),
        ("prose/artistic", "/usr/share/common-licenses/Artistic", None),
        ("prose/gfdl-1.3", "/usr/share/common-licenses/GFDL-1.3", 20000),
        ("code/python/textwrap.py", str(py / "textwrap.py"), None),
        ("code/python/json_decoder.py", str(py / "json" / "decoder.py"), None),
        ("code/python/heapq.py", str(py / "heapq.py"), None),
        ("code/python/test_unicode.py", str(py / "test" / "test_unicode.py"), 40000),
        ("code/python/test_codecs.py", str(py / "test" / "test_codecs.py"), 30000),
        ("code/python/koi8_r_module.py", str(py / "test" / "encoded_modules" / "module_koi8_r.py"), None),
        ("code/c/zpipe.c", "/usr/share/doc/zlib1g-dev/examples/zpipe.c", None),
        ("code/c/gun.c", "/usr/share/doc/zlib1g-dev/examples/gun.c", 25000),
        ("code/c/stdio.h", "/usr/include/stdio.h", 20000),
        ("code/go/persistent-https-main.go", "/usr/share/doc/git/contrib/persistent-https/main.go", None),
        ("code/shell/coverage-diff.sh", "/usr/share/doc/git/contrib/coverage-diff.sh", None),
        ("data/test_psl.txt", "/usr/share/doc/publicsuffix/examples/test_psl.txt", None),
    ]
    for name, path, limit in sources:
        data = _read(path)
        if data is not None:
            docs.append((name, _cut_utf8(data, limit) if limit else data))
    for path in sorted(glob.glob(str(py / "test" / "cjkencodings" / "*-utf8.txt"))):
        data = _read(path)
        if data is not None:
            docs.append(("cjk/" + os.path.basename(path), data))
    return docs


SPECIAL_DOCS = [
    "<｜begin▁of▁sentence｜><｜User｜>hi<｜Assistant｜>",
    "<｜begin▁of▁sentence｜>You are a helpful assistant.<｜User｜>What is 2+2?<｜Assistant｜></think>4<｜end▁of▁sentence｜>",
    "<｜User｜>Solve x^2=4<｜Assistant｜><think>\nx = ±2\n</think>\n\nx = 2 or x = -2<｜end▁of▁sentence｜>",
    "text<｜User｜><｜User｜>  <｜Assistant｜>\n<｜end▁of▁sentence｜>trailing",
    "<｜User｜ > not a token <｜User｜ <|User|> <｜user｜> <｜User｜",  # near misses
    "<think></think><think>x</think> <think>\n</think>",
    "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\": \"Paris\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
    "｜DSML｜<dsml:invoke name=\"x\"></dsml:invoke>｜DSML｜",
    "<｜fim▁begin｜>def f(x):\n    <｜fim▁hole｜>\n    return y<｜fim▁end｜>",
    "<|EOT|><｜▁pad▁｜><｜place▁holder▁no▁17｜><｜latest_reminder｜><｜image｜><｜ref｜>a<｜/ref｜>",
    "a<｜User｜>b<｜Assistant｜>c<｜User｜>d" * 20,
    "<｜begin▁of▁sentence｜<｜begin▁of▁sentence｜>｜>",  # overlapping
    "<｜table｜><｜tr｜><｜td｜>1<｜/td｜><｜/tr｜><｜/table>｜",
]

PROSE = [
    "The quick brown fox jumps over the lazy dog. It's 3:45pm; don't you think we'd better go?",
    "I'm sure you'll agree: they've done it, we're done, she'd said so. \"Quotes\" and 'single quotes'.",
    "Mr. O'Neil's co-worker (an ex-pat) e-mailed me at john.doe@example.com — see https://example.org/a/b?c=d&e=f#g.",
    "Ünïcödé façade, naïve café, Zürich, São Paulo, Kraków, Ærøskøbing, İstanbul, ﬁnal ligature.",
    "Здравствуйте, мир! Это тестовое предложение на русском языке, ёлка и Ёж.",
    "Γειά σου Κόσμε! Η γρήγορη καφέ αλεπού πηδάει πάνω από τον τεμπέλη σκύλο.",
    "مرحبا بالعالم! هذه جملة اختبار باللغة العربية، مع أرقام ١٢٣٤٥٦٧٨٩٠ وعلامات ترقيم؟",
    "שלום עולם! זהו משפט בדיקה בעברית עם ניקוד: בְּרֵאשִׁית בָּרָא.",
    "नमस्ते दुनिया! यह हिंदी में एक परीक्षण वाक्य है। संख्याएँ: १२३४५६७८९०।",
    "বাংলা ভাষা, தமிழ் மொழி, తెలుగు, ಕನ್ನಡ, മലയാളം, ગુજરાતી, ਪੰਜਾਬੀ, ଓଡ଼ିଆ, සිංහල.",
    "ภาษาไทยไม่มีการเว้นวรรคระหว่างคำ ແລະພາສາລາວ ແລະ ភាសាខ្មែរ និង မြန်မာဘာသာ",
    "한국어 문장입니다. 안녕하세요! 띄어쓰기가 있습니다. ㄱㄴㄷ ㅏㅑㅓ",
    "日本語の文章です。カタカナとひらがな、漢字が混ざっています。ｶﾀｶﾅ（半角）も。ー〜・「」『』",
    "中文句子：我们今天去北京大学，参观了图书馆。繁體中文：臺灣、香港。標點符號！？、；：“”‘’（）《》【】",
    "Tiếng Việt có dấu: Người ta thường nói rằng học, học nữa, học mãi.",
    "ქართული ენა, Հայերեն լեզու, አማርኛ ቋንቋ, ᏣᎳᎩ, ᚠᚢᚦᚨᚱᚲ, 𐌰𐌱𐌲, ꦧꦱꦗꦮ",
    "Math: ∀x∈ℝ, ∃y: x²+y²≥0; ∑ᵢ aᵢ = ∫₀^∞ f(x)dx ≈ 3.14159… ≠ √2 ± ∞ ⊂ ⊆ ∪ ∩ ⟨ψ|φ⟩ ℏ ∂ ∇",
    "Currency: $100, €50.00, £20, ¥1000, ₹500, ₿0.001, ₩5000, 100 USD/EUR 1.08",
    "Combining: e\u0301 a\u0300\u0301\u0302 \u0301alone Z\u0335\u0321a\u0338l\u0337g\u0334o\u0336 n\u0303 \u20dd\u20e3",
]

CODE = [
    'fn main() {\n    let v: Vec<i32> = (0..10).map(|x| x * x).collect();\n    println!("{:?}", v);\n}\n',
    "#include <stdio.h>\nint main(void) {\n\tfor (int i = 0; i < 10; ++i) printf(\"%d\\n\", i);\n\treturn 0;\n}\n",
    "const f = async (a, b = {}) => { const { x, ...rest } = b; return a?.y ?? x; };\nexport default f;\n",
    "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tch := make(chan int, 3)\n\tgo func() { ch <- 42 }()\n\tfmt.Println(<-ch)\n}\n",
    "SELECT u.id, COUNT(*) AS n FROM users u LEFT JOIN orders o ON o.user_id = u.id WHERE u.created_at >= '2024-01-01' GROUP BY u.id HAVING n > 5;\n",
    "<!DOCTYPE html>\n<html lang=\"en\">\n<head><meta charset=\"utf-8\"><title>Test</title></head>\n<body>\n  <div class=\"a b\" id='x'>&amp;&lt;&gt;&#x1F600;</div>\n</body>\n</html>\n",
    "\\documentclass{article}\n\\begin{document}\n$$\\frac{a}{b} = \\sum_{i=0}^{n} \\alpha_i^2$$\n\\end{document}\n",
    "public class Hello {\r\n    public static void main(String[] args) {\r\n        System.out.println(\"Hello, World!\");\r\n    }\r\n}\r\n",
    "#!/bin/bash\nset -euo pipefail\nfor f in *.txt; do\n  [[ -f \"$f\" ]] && wc -l \"$f\" | awk '{print $1}'\ndone 2>&1 | sort -n\n",
    "x=1;y=2;z=x+y*3-4/5%6**7//8|9&10^~11<<12>>13;a+=1;b-=2;c*=3;d/=4;e==f!=g<=h>=i&&j||!k",
    "    def __init__(self, *args, **kwargs) -> None:\n        super().__init__(*args, **kwargs)\n        self._cache: dict[str, list[int]] = {}\n",
    "# Title\n\n- item one\n- item **two**\n\n```python\nprint('hi')\n```\n\n| a | b |\n|---|---|\n| 1 | 2 |\n",
    "key: value\nlist:\n  - a\n  - b: c\n    d: [1, 2, 3]\nanchors: &x {k: v}\nref: *x\n",
]


def json_documents(rng: random.Random) -> list[tuple[str, bytes]]:
    def value(depth):
        r = rng.random()
        if depth > 3 or r < 0.3:
            return rng.choice([rng.randint(-10**9, 10**9), rng.random() * 1e6, True, False, None,
                               "".join(rng.choice("abcdefghij klmnop_-/\\\"'é中😀\n\t") for _ in range(rng.randint(0, 20)))])
        if r < 0.65:
            return [value(depth + 1) for _ in range(rng.randint(0, 5))]
        return {f"key_{rng.randint(0, 999)}": value(depth + 1) for _ in range(rng.randint(0, 5))}

    docs = []
    for i in range(6):
        v = {"id": i, "data": [value(0) for _ in range(12)]}
        docs.append((f"json/generated_{i}_indent", json.dumps(v, indent=2, ensure_ascii=i % 2 == 0).encode()))
        docs.append((f"json/generated_{i}_compact", json.dumps(v, separators=(",", ":"), ensure_ascii=False).encode()))
    return docs


def digit_documents(rng: random.Random) -> list[tuple[str, bytes]]:
    docs = []
    runs = ["".join(rng.choice("0123456789") for _ in range(n)) for n in range(1, 41)]
    docs.append(("digits/runs_1_to_40", " ".join(runs).encode()))
    docs.append(("digits/runs_no_space", "x".join(runs).encode()))
    docs.append(("digits/numbers", "3.14159 2,718,281 1e-10 0x1F 0b1010 -42 +7 1_000_000 12:30:45 2024-06-01 v1.2.3 192.168.0.1 ①②③ ⅠⅡⅢ ½¾ ²³ ٣٤٥ ०१२ ๑๒๓ 𝟘𝟙𝟚".encode()))
    docs.append(("digits/long", ("1234567890" * 50 + "\n" + "9" * 301 + "a" + "0" * 7).encode()))
    return docs


def whitespace_documents() -> list[tuple[str, bytes]]:
    ws = [" ", "  ", "\t", "\n", "\r\n", "\r", "\v", "\f", "\u00a0", "\u2028", "\u2029", "\u3000",
          "\u200b", "\u0085", "\u1680", "\u2003", "\u202f", "\u205f", "\ufeff", "\u180e", "\u200d"]
    docs = []
    parts = []
    for a in ws:
        for b in ws:
            parts.append(f"x{a}{b}y{a}z{b}")
    docs.append(("whitespace/pairs", "|".join(parts).encode()))
    docs.append(("whitespace/crlf", "line one\r\nline two\r\n\r\n  indented\r\n\ttabbed\r\n \r\n".encode()))
    docs.append(("whitespace/mixed_runs", "a \t\n b\n\n\n  c   \n\t\t\n d\u00a0\u00a0e \u3000f\u2028g\r\r\n h   ".encode()))
    docs.append(("whitespace/only_spaces", (" " * 17).encode()))
    docs.append(("whitespace/only_newlines", ("\n" * 9).encode()))
    docs.append(("whitespace/leading_trailing", "   hello world   \n\n".encode()))
    docs.append(("whitespace/space_before_punct", "a , b . c ! d ? e ... f !? g ( h ) [ i ] { j }\n.\n,\n".encode()))
    return docs


def emoji_documents() -> list[tuple[str, bytes]]:
    s = ("👍 👍🏻 👍🏼 👍🏽 👍🏾 👍🏿 👨‍👩‍👧‍👦 👩🏽‍💻 🏳️‍🌈 🏴‍☠️ 🇫🇷🇯🇵🇺🇸 1️⃣ #️⃣ ❤️ ♥ ☺️ 😀😃😄😁😆😅🤣😂 "
         "🧑🏿‍🤝‍🧑🏻 👁️‍🗨️ 🏴󠁧󠁢󠁳󠁣󠁴󠁿 🫠🫶🏾 text😀text 😀.😀,😀!\n🔥🔥🔥 ✨ emoji at end 🎉")
    return [("emoji/mix", s.encode()), ("emoji/repeated", ("😀" * 300 + "👨‍👩‍👧‍👦" * 50).encode())]


def repeated_documents() -> list[tuple[str, bytes]]:
    return [
        ("repeat/a_5000", ("a" * 5000).encode()),
        ("repeat/space_3000_then_x", (" " * 3000 + "x").encode()),
        ("repeat/newline_1000", ("\n" * 1000).encode()),
        ("repeat/equals_2000", ("=" * 2000).encode()),
        ("repeat/dash_line", (("-" * 80 + "\n") * 20).encode()),
        ("repeat/cjk_1000", ("中" * 1000).encode()),
        ("repeat/kana_mix", ("あいうえおアイウエオ" * 100).encode()),
        ("repeat/ab_4000", ("ab" * 2000).encode()),
        ("repeat/dots", ("." * 513 + " " + "!" * 100).encode()),
        ("repeat/tabs", ("\t" * 200 + "x" + "\t" * 3).encode()),
        ("repeat/zwsp", ("\u200b" * 100 + "a" + "\u200b" * 5).encode()),
        ("repeat/mark_run", ("\u0301" * 300 + "a\u0301" * 100).encode()),
    ]


def invalid_utf8_documents(rng: random.Random) -> list[tuple[str, bytes]]:
    docs = [
        ("invalid/lone_continuation", b"abc\x80def\xbf\x80ghi"),
        ("invalid/truncated_sequences", b"x\xe2\x82 y\xf0\x9f\x98 z\xc3 end\xe4"),
        ("invalid/overlong", b"\xc0\x80 \xc1\xbf \xe0\x80\x80 \xf0\x80\x80\x80 ok"),
        ("invalid/surrogates", b"\xed\xa0\x80\xed\xbf\xbf \xed\x9f\xbf valid"),
        ("invalid/too_large", b"\xf4\x90\x80\x80 \xf5\x80\x80\x80 \xf8\x88\x80\x80\x80 \xff\xfe"),
        ("invalid/mixed_with_text", "héllo ".encode() + b"\xff" + " wörld 中".encode() + b"\xe4\xb8" + "文 😀".encode() + b"\xf0\x9f"),
        ("invalid/latin1_text", "Grüße aus Köln, señor, ça va? ".encode("latin-1") * 5),
        ("invalid/special_token_split", "<｜User｜>".encode()[:5] + b"\xff" + "<｜User｜>".encode()[5:] + "<｜User｜>".encode()),
    ]
    for i in range(6):
        docs.append((f"invalid/random_bytes_{i}", bytes(rng.randrange(256) for _ in range(rng.randint(50, 600)))))
    # Valid text with random byte damage.
    base = "The café in 東京 serves 🍣 and ramen — ¿sí? Ω≈ç√∫ ".encode() * 8
    for i in range(4):
        b = bytearray(base)
        for _ in range(12):
            b[rng.randrange(len(b))] = rng.randrange(256)
        docs.append((f"invalid/damaged_{i}", bytes(b)))
    return docs


# Characters that exercise each branch of the pre-tokenizer regexes.
TRICKY_ALPHABET = [
    "a", "Z", "é", "ß", "Ж", "ا", "क", "ि", "\u0301", "\u20dd", "中", "龥", "龦", "あ", "ア", "ー", "・", "ｱ", "한",
    "0", "7", "٣", "Ⅻ", "½", "²", ".", ",", "!", "?", "'", "\"", "-", "_", "@", "#", "(", ")", "«", "»", "、", "。",
    "+", "=", "<", ">", "$", "€", "^", "`", "|", "~", "©", "😀", "🏽", "\u200d", "\ufe0f",
    " ", " ", " ", "  ", "\t", "\n", "\n", "\r", "\r\n", "\v", "\f", "\u00a0", "\u2028", "\u3000", "\u200b", "\u0085",
    "\x00", "\x1b", "\u00ad", "\ue000", "\U000f0000", "\U0001F9FF", "\u0378",  # control, format, private, unassigned
    "\U000105c0", "\u1c89", "\ua7cb", "\U00016d40", "\U0001e5d0",  # letters new in Unicode 15.1 / 16.0
    "\U00011f50", "\U0001ccf0",  # digits new in Unicode 15 / 16
]


def random_documents(rng: random.Random) -> list[tuple[str, bytes]]:
    docs = []
    # Many short strings over the tricky alphabet: every regex branch and boundary.
    for i in range(40):
        pieces = []
        for _ in range(60):
            n = rng.randint(1, 40)
            pieces.append("".join(rng.choice(TRICKY_ALPHABET) for _ in range(n)))
        docs.append((f"random/tricky_{i:02d}", "\x1f".join(pieces).encode()))
    # Random code points over the whole Unicode range (assigned or not, no surrogates).
    ranges = [(0x20, 0x7F), (0xA0, 0x2FF), (0x300, 0x36F), (0x370, 0x1FFF), (0x2000, 0x2BFF), (0x2E80, 0x9FFF),
              (0xA000, 0xD7FF), (0xE000, 0xFFFD), (0x10000, 0x1FFFF), (0x20000, 0x3FFFF), (0xE0000, 0x10FFFF)]
    for i in range(30):
        out = []
        for _ in range(rng.randint(200, 800)):
            lo, hi = rng.choice(ranges)
            out.append(chr(rng.randint(lo, hi)))
            if rng.random() < 0.15:
                out.append(rng.choice([" ", "\n", "a", "1", ".", "  "]))
        docs.append((f"random/unicode_{i:02d}", "".join(out).encode()))
    # Random "words" in many scripts.
    scripts = {"latin": (0x61, 0x7A), "cyrillic": (0x430, 0x44F), "arabic": (0x627, 0x64A), "devanagari": (0x915, 0x939),
               "hangul": (0xAC00, 0xD7A3), "cjk": (0x4E00, 0x9FFF), "hiragana": (0x3041, 0x3096), "thai": (0xE01, 0xE2E),
               "greek": (0x3B1, 0x3C9), "hebrew": (0x5D0, 0x5EA), "georgian": (0x10D0, 0x10FA), "ethiopic": (0x1200, 0x1248)}
    for i in range(10):
        words = []
        for _ in range(400):
            lo, hi = scripts[rng.choice(list(scripts))]
            words.append("".join(chr(rng.randint(lo, hi)) for _ in range(rng.randint(1, 9))))
            words.append(rng.choice([" ", " ", " ", ", ", ". ", "\n", "", "123", "'s ", " - "]))
        docs.append((f"random/mixed_scripts_{i}", "".join(words).encode()))
    return docs


FLAG_DOCS = [
    "a [lstrip] b  [lstrip]c\t[lstrip]\n[lstrip]",
    "x[rstrip]  y [rstrip]\n\nz[rstrip]",
    "word words aword word_ word. (word) 中word word\u0301 word1 word",
    "<|special|> <|special|>x<|special|>xy <norm> < norm> <NORM>",
    "  <both>  z <both><both>\n",
    "[lstrip][rstrip]word<|special|>x",
]


def written_documents() -> list[tuple[str, bytes]]:
    docs = []
    for i, s in enumerate(FLAG_DOCS):
        docs.append((f"special/flags_{i}", s.encode()))
    for i, s in enumerate(PROSE):
        docs.append((f"prose/written_{i:02d}", s.encode()))
    docs.append(("prose/all_written", "\n\n".join(PROSE).encode()))
    for i, s in enumerate(CODE):
        docs.append((f"code/written_{i:02d}", s.encode()))
    for i, s in enumerate(SPECIAL_DOCS):
        docs.append((f"special/{i:02d}", s.encode()))
    docs.append(("edge/empty", b""))
    docs.append(("edge/one_space", b" "))
    docs.append(("edge/one_newline", b"\n"))
    docs.append(("edge/one_letter", b"a"))
    docs.append(("edge/nul", b"a\x00b\x00\x00"))
    docs.append(("edge/bom", "\ufeffhello".encode()))
    docs.append(("edge/contractions", "don't won't I'll you're we've he'd it's 'tis O'Reilly rock'n'roll".encode()))
    docs.append(("edge/punct_letters", ".com ,and !Not ?why @user #tag $var %d &amp *ptr -flag /path :key ;x <tag >y [z \\n ]w ^up _priv `cmd {a |b }c ~home .ÿ".encode()))
    docs.append(("edge/hangul_jamo", "\u1100\u1161\u11a8 \u3131\u314f".encode()))
    return docs


def build_corpus() -> list[tuple[str, bytes]]:
    rng = random.Random(20240601)
    docs = []
    docs += file_documents()
    docs += written_documents()
    docs += json_documents(rng)
    docs += digit_documents(rng)
    docs += whitespace_documents()
    docs += emoji_documents()
    docs += repeated_documents()
    docs += invalid_utf8_documents(rng)
    docs += random_documents(rng)
    names = [n for n, _ in docs]
    assert len(names) == len(set(names)), "duplicate document names"
    return docs


def write_corpus(path: pathlib.Path, docs: list[tuple[str, bytes]]) -> None:
    out = bytearray(b"DITKCORP")
    out += struct.pack("<II", 1, len(docs))
    for name, text in docs:
        n = name.encode()
        out += struct.pack("<I", len(n)) + n + struct.pack("<I", len(text)) + text
    path.write_bytes(bytes(out))


def read_corpus(path: pathlib.Path) -> list[tuple[str, bytes]]:
    data = path.read_bytes()
    assert data[:8] == b"DITKCORP", f"{path}: not a corpus file"
    version, n = struct.unpack_from("<II", data, 8)
    assert version == 1
    pos, docs = 16, []
    for _ in range(n):
        (ln,) = struct.unpack_from("<I", data, pos); pos += 4
        name = data[pos:pos + ln].decode(); pos += ln
        (lt,) = struct.unpack_from("<I", data, pos); pos += 4
        docs.append((name, data[pos:pos + lt])); pos += lt
    return docs


# --------------------------------------------------------------------------------------------
# Reference ids
# --------------------------------------------------------------------------------------------

def tiny_tokenizer(real_path: str, gpt2: bool, n_merges: int = 3000) -> str:
    """A small byte-level BPE cut from the real one (its first n_merges merges), with added
    tokens that use every flag (lstrip, rstrip, single_word, normalized, special). With gpt2=True
    its pre-tokenizer is ByteLevel(use_regex=True) instead of DeepSeek's splits."""
    real = json.loads(pathlib.Path(real_path).read_text())
    merges = real["model"]["merges"][:n_merges]
    keep = set()
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    keep.update(chr(c) for c in cs)
    for m in merges:
        a, b = m.split(" ") if isinstance(m, str) else m
        keep.update([a, b, a + b])
    vocab = {t: i for i, t in enumerate(sorted(keep, key=lambda t: real["model"]["vocab"][t]))}
    added = []
    specs = [("<|special|>", True, False, False, False, False), ("<|special|>xy", True, False, False, False, False),
             ("[lstrip]", False, False, True, False, False), ("[rstrip]", False, False, False, True, False),
             ("word", False, True, False, False, True), ("<norm>", False, True, False, False, False),
             ("<both>", True, False, True, True, False)]
    for k, (content, special, normalized, lstrip, rstrip, single_word) in enumerate(specs):
        added.append({"id": len(vocab) + k, "content": content, "single_word": single_word, "lstrip": lstrip,
                      "rstrip": rstrip, "normalized": normalized, "special": special})
    tok = dict(real)
    tok["added_tokens"] = added
    tok["model"] = dict(real["model"], vocab=vocab, merges=merges)
    if gpt2:
        tok["pre_tokenizer"] = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    return json.dumps(tok, ensure_ascii=False)


def tiny_documents(docs: list[tuple[str, bytes]]) -> list[bool]:
    """Which documents the tiny tokenizers' references cover (keeps the data small)."""
    prefixes = ("special/", "edge/", "whitespace/", "prose/written", "code/written", "digits/", "emoji/mix",
                "invalid/", "random/tricky_0", "random/unicode_0", "random/mixed_scripts_0", "json/generated_0")
    return [name.startswith(prefixes) and len(t) <= 20000 for name, t in docs]


def encode_all(tokenizer_path: str, docs: list[tuple[str, bytes]]) -> list[tuple[list[int], list[int] | None]]:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(tokenizer_path)
    plain = Tokenizer.from_file(tokenizer_path)
    plain.encode_special_tokens = True  # special tokens are encoded as ordinary text
    result = []
    for name, raw in docs:
        text = raw.decode("utf-8", errors="replace")
        ids = tok.encode(text, add_special_tokens=True).ids
        ids_plain = plain.encode(text, add_special_tokens=True).ids if name.startswith("special/") else None
        result.append((ids, ids_plain))
    return result


def write_ids(path: pathlib.Path, ids: list[tuple[list[int] | None, list[int] | None]]) -> None:
    out = bytearray(b"DITKIDS1")
    out += struct.pack("<I", len(ids))
    for pair in ids:
        for v in pair:
            if v is None:
                out += struct.pack("<I", NOT_STORED)
            else:
                out += struct.pack("<I", len(v)) + struct.pack(f"<{len(v)}i", *v)
    path.write_bytes(bytes(out))


def default_tokenizer() -> str:
    shared = pathlib.Path(os.environ.get("DEEPINFER_SHARED_DIR", REPO.parent / "shared"))
    return str(shared / "tokenizers" / "deepseek_v4" / "tokenizer.json")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokenizer", default=default_tokenizer())
    ap.add_argument("--out", default=str(DATA))
    ap.add_argument("--rebuild-corpus", action="store_true")
    args = ap.parse_args()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    corpus_path = out / "corpus.bin"
    if args.rebuild_corpus or not corpus_path.exists():
        docs = build_corpus()
        write_corpus(corpus_path, docs)
    docs = read_corpus(corpus_path)
    ids = encode_all(args.tokenizer, docs)
    write_ids(out / "reference_ids.bin", ids)
    # The two tiny tokenizers (added-token flags; GPT-2 regex) and their ids on part of the corpus.
    chosen = tiny_documents(docs)
    for name, gpt2 in (("tiny_flags", False), ("tiny_gpt2", True)):
        (out / name).mkdir(exist_ok=True)
        path = out / name / "tokenizer.json"
        path.write_text(tiny_tokenizer(args.tokenizer, gpt2), encoding="utf-8")
        tiny = encode_all(str(path), docs)
        write_ids(out / f"reference_ids_{name}.bin",
                  [(a, b) if c else (None, None) for (a, b), c in zip(tiny, chosen)])
    n_bytes = sum(len(t) for _, t in docs)
    n_ids = sum(len(a) + (len(b) if b else 0) for a, b in ids)
    print(f"{len(docs)} documents, {n_bytes} bytes, {n_ids} reference ids -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
