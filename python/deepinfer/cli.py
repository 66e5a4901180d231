"""The `deepinfer` console script: forwards argv to the C++ command line."""

import sys


def main() -> int:
    from deepinfer import _core

    sys.stdout.flush()
    return _core.cli_main(["deepinfer", *sys.argv[1:]])


if __name__ == "__main__":
    sys.exit(main())
