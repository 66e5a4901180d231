"""The `deepinfer` console script: forwards argv to the C++ command line.

`deepinfer serve` without --model gets the model LLM() would run (DEEPINFER_HF_MODEL_DIR, the
Hugging Face cache copy of the default checkpoint, else the embedded default model installed
with the package), passed on as --model.
"""

import sys


def _with_model(args: list[str]) -> list[str]:
    if not args or args[0] != "serve" or any(a == "--model" or a.startswith("--model=")
                                             for a in args):
        return args
    if any(a in ("-h", "--help") for a in args):
        return args
    from deepinfer.llm import resolve_model_dir

    return [args[0], "--model", resolve_model_dir(None), *args[1:]]


def main() -> int:
    from deepinfer import _core

    sys.stdout.flush()
    return _core.cli_main(["deepinfer", *_with_model(sys.argv[1:])])


if __name__ == "__main__":
    sys.exit(main())
