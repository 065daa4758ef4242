"""The accelerator benchmark: images/s, model FLOP utilisation and the seed's study.

Usage:
    python benchmarks/accelerator.py --out runs/accelerator
    python benchmarks/accelerator.py --smoke --out /tmp/accelerator   # CPU, ~1 min

Runs on the JAX backend (set here), on every JAX device of the machine,
within `--budget-seconds` (default 480). Writes `accelerator.csv` and
`accelerator.md` under `--out` and prints the tables; see
`keras_tpugan.bench.accelerator` for what each part measures.
`keras-tpugan bench --accelerator` runs the same. On a machine with JAX
alone, `benchmarks/carry_wheels.sh` gathers the other wheels it needs.
"""

import argparse
import os

os.environ.setdefault("KERAS_BACKEND", "jax")

from keras_tpugan.bench import accelerator  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="runs/accelerator")
    parser.add_argument("--smoke", action="store_true", help="about a minute on a CPU")
    parser.add_argument("--budget-seconds", type=float, default=480.0)
    args = parser.parse_args()
    accelerator.run_benchmark(
        args.out, smoke=args.smoke, budget_seconds=args.budget_seconds
    )


if __name__ == "__main__":
    main()
