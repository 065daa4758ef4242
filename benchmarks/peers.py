"""keras_tpugan against the TF DCGAN tutorial loop and the keras-io pattern.

Usage:
    python benchmarks/peers.py   # the table of docs/results/throughput-and-peers.md
    python benchmarks/peers.py --batch-sizes 16 --repeats 2 --csv peers.csv

The same as `keras-tpugan bench --peers`; see `keras_tpugan.bench.peers` for what is
measured.
"""

import sys

from keras_tpugan.cli import main as cli

if __name__ == "__main__":
    sys.exit(cli.main(["bench", "--peers", *sys.argv[1:]]))
