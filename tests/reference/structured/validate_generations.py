"""Validates documents generated under our token masks with the Python `jsonschema` package.

structured_bench samples whole generations on the real V4 tokenizer (random tokens from each
mask) and writes the token ids; this script decodes them with Hugging Face `tokenizers` and
checks every finished document against its schema (Draft 2020-12, with the format checker).
Exit status 1 if any document fails.

Run (from the repository root, after building structured_bench):
  .venv/bin/python tests/reference/structured/validate_generations.py \
      --bench build/structured/bench/structured/structured_bench --docs 30 --max-steps 1500
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import jsonschema
from tokenizers import Tokenizer


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", required=True)
    ap.add_argument("--tokenizer", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                                                        "..", "shared", "tokenizers", "deepseek_v4", "tokenizer.json"))
    ap.add_argument("--docs", type=int, default=30)
    ap.add_argument("--max-steps", type=int, default=1500)
    args = ap.parse_args()
    tok_path = os.path.abspath(args.tokenizer)
    tmp = tempfile.mkdtemp()
    tokens_json = os.path.join(tmp, "tokens.json")
    subprocess.run([args.bench, "--tokenizer", tok_path, "--docs", str(args.docs), "--max-steps", str(args.max_steps),
                    "--tokens", tokens_json],
                   check=True, stdout=subprocess.DEVNULL)
    schemas = json.loads(subprocess.run([args.bench, "--dump-schemas"], check=True, capture_output=True,
                                        text=True).stdout)
    sequences = json.load(open(tokens_json))
    tok = Tokenizer.from_file(tok_path)
    eos = tok.token_to_id("<｜end▁of▁sentence｜>")
    bad = 0
    for name, schema in schemas.items():
        schema = json.loads(schema)
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        validator = cls(schema, format_checker=cls.FORMAT_CHECKER)
        finished = 0
        for seq in sequences[name]:
            if not seq or seq[-1] != eos:
                continue  # hit the step limit: not a finished document
            finished += 1
            text = tok.decode(seq[:-1], skip_special_tokens=False)
            try:
                doc = json.loads(text)
                errors = [e.message for e in validator.iter_errors(doc)]
            except json.JSONDecodeError as e:
                errors = [f"not JSON: {e}"]
            if errors:
                bad += 1
                print(f"FAIL {name}: {text[:200]!r}: {errors[:2]}")
        print(f"{name:12} {finished} finished documents validated")
    print("all valid" if bad == 0 else f"{bad} invalid documents")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
