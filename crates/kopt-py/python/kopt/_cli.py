"""The ``kopt`` console script: the same command line as the binary."""

import os
import sys

from . import _kopt
from ._api import tracer_path


def main() -> None:
    tracer = tracer_path()
    if tracer and "KOPT_TRACER" not in os.environ:
        os.environ["KOPT_TRACER"] = tracer
    sys.exit(_kopt.cli_main(["kopt", *sys.argv[1:]]))


if __name__ == "__main__":
    main()
