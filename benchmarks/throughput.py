"""Throughput of the default MNIST GAN: images/s, FLOP/s and ratios, in one run.

Usage:
    python benchmarks/throughput.py   # docs/results/throughput-and-peers.md
    python benchmarks/throughput.py --batch-sizes 64 --steps 5 --csv out.csv

The same as `keras-tpugan bench`; see `keras_tpugan.bench.throughput` for what is
measured.
"""

import sys

from keras_tpugan.cli import main as cli

if __name__ == "__main__":
    sys.exit(cli.main(["bench", *sys.argv[1:]]))
