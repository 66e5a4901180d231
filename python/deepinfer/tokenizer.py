"""The DeepSeek-V4 tokenizer (C++; same ids as Hugging Face `tokenizers`).

    from deepinfer.tokenizer import Tokenizer, IncrementalDetokenizer

    tok = Tokenizer.from_file("/models/ds4")          # a tokenizer.json or its directory
    ids = tok.encode("<｜User｜>hi<｜Assistant｜>")     # list[int]; str or bytes
    text = tok.decode(ids, skip_special_tokens=False)
    tok.vocab_size, tok.token_to_id("<think>"), tok.id_to_token(0), tok.bos_id, tok.eos_id

    detok = IncrementalDetokenizer(tok)               # streaming: whole characters only
    for i in ids:
        print(detok.add(i), end="")
    print(detok.flush())

`encode(bytes)` repairs invalid UTF-8 like `bytes.decode("utf-8", errors="replace")`;
`allow_special=False` encodes special tokens as plain text (HF's `encode_special_tokens=True`).
Errors: FileNotFoundError (no such file) or ValueError (malformed or unsupported tokenizer.json).
The GIL is released while long texts are encoded, so threads can encode in parallel.
"""

from deepinfer._core import IncrementalDetokenizer, Tokenizer

__all__ = ["Tokenizer", "IncrementalDetokenizer"]
