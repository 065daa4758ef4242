"""`python -m keras_tpugan.cli`: the `keras-tpugan` command."""

import sys

from keras_tpugan.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
