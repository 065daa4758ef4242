"""`keras-tpugan bench`: throughput, peers, weak scaling and the accelerator
benchmark."""

import os

from keras_tpugan.precision import ALL_REDUCE_DTYPES, POLICIES

EXAMPLES = {
    "bench": """examples:
  keras-tpugan bench --batch-sizes 64 128 256 --csv bench.csv
  keras-tpugan bench --replicas 1 2 --precisions mixed_bfloat16 --xla on
  keras-tpugan bench --backend tensorflow jax --batch-sizes 64 128 --csv both.csv
  keras-tpugan bench --peers --csv peers.csv
  keras-tpugan bench --processes 1 2 --precisions float32
  keras-tpugan bench --accelerator --out runs/accelerator
""",
}


def add_parsers(command):
    """Adds `bench` to the parser (`command`: see `cli.main`)."""
    bench = command(
        "bench",
        "throughput matrix: precision x XLA x batch size x replicas",
        "Measure training images/s of the default MNIST model on synthetic data.",
    )
    bench.add_argument(
        "--batch-sizes",
        type=int,
        nargs="+",
        default=None,
        help="default: 64 128 256 (with --peers: 16 64 128 512)",
    )
    bench.add_argument(
        "--replicas",
        type=int,
        nargs="+",
        default=[1],
        help="replica counts to measure (default 1)",
    )
    bench.add_argument(
        "--precisions",
        nargs="+",
        default=["float32", "mixed_bfloat16"],
        choices=POLICIES,
        help="dtype policies to measure (default: float32 mixed_bfloat16)",
    )
    bench.add_argument(
        "--xla",
        nargs="+",
        default=None,
        choices=("off", "on", "auto"),
        help="XLA settings (default: off on; with --processes: auto)",
    )
    bench.add_argument(
        "--steps",
        type=int,
        default=None,
        help="steps per timing (default 10; with --peers 2,048 images' worth)",
    )
    bench.add_argument(
        "--repeats", type=int, default=3, help="timings per cell (rounds of --peers)"
    )
    bench.add_argument(
        "--peers",
        action="store_true",
        help="instead: the TF DCGAN tutorial loop and the keras-io train_step "
        "pattern beside keras_tpugan's modes, same models, interleaved rounds "
        "(on JAX: the tutorial's step as a jax.jit loop; no keras-io row)",
    )
    bench.add_argument(
        "--profile",
        action="store_true",
        help="with --peers: instead of timing, trace --steps steps of each mode "
        "(default 16) with the backend's profiler and list kernel time per step "
        "by op type",
    )
    bench.add_argument(
        "--processes",
        type=int,
        nargs="+",
        default=None,
        help="instead: weak scaling over this many processes (for example 1 2) "
        "on this host, each pinned to the same number of cores, at a fixed "
        "batch per process (the first --batch-sizes, default 64; one "
        "--precisions and --xla; width and latent 64 unless given)",
    )
    bench.add_argument(
        "--all-reduce-dtype",
        choices=ALL_REDUCE_DTYPES,
        default="float32",
        help="with --processes: the type the gradients cross the processes in",
    )
    bench.add_argument("--width", type=int, default=None, help="default 128")
    bench.add_argument("--latent-dim", type=int, default=None, help="default 128")
    bench.add_argument(
        "--csv", default=None, help="also save the table as CSV (default: printed only)"
    )
    bench.add_argument(
        "--accelerator",
        action="store_true",
        help="instead: the accelerator benchmark on every JAX device (images/s "
        "and model FLOP utilisation of two DCGANs, float32 and bfloat16 at "
        "batch 64-512 and the largest that fits; steps_per_execution; the "
        "seed's MNIST batch-size study), written under --out as CSV and "
        "Markdown; runs on JAX",
    )
    bench.add_argument(
        "--smoke",
        action="store_true",
        help="with --accelerator: about a minute on a CPU, small networks",
    )
    bench.add_argument(
        "--budget-seconds",
        type=float,
        default=480.0,
        help="with --accelerator: skip the cells that would start later",
    )
    bench.add_argument(
        "--out", default=None, help="with --accelerator (default runs/accelerator)"
    )


_XLA = {"on": True, "off": False, "auto": "auto"}


def _bench(args):
    from keras_tpugan.bench import throughput

    if args.accelerator:
        from keras_tpugan.bench import accelerator

        out = args.out or os.path.join("runs", "accelerator")
        accelerator.run_benchmark(
            out, smoke=args.smoke, budget_seconds=args.budget_seconds
        )
        print(f"keras-tpugan: wrote {out}/accelerator.csv and accelerator.md")
        return 0
    if args.smoke or args.out:
        raise ValueError(
            "Expected --smoke and --out with --accelerator only. Received: "
            "them without --accelerator."
        )
    if args.profile and not args.peers:
        raise ValueError(
            "Expected --profile with --peers (it profiles the peers "
            "benchmark's modes). Received: --profile alone. Add --peers."
        )
    if args.peers:
        return _peers(args)
    if args.processes:
        return _weak_scaling(args)
    kwargs = dict(
        batch_sizes=args.batch_sizes or [64, 128, 256],
        replicas=args.replicas,
        precisions=args.precisions,
        xla=[_XLA[x] for x in args.xla or ["off", "on"]],
        steps=args.steps or 10,
        repeats=args.repeats,
        width=args.width or 128,
        latent_dim=args.latent_dim or 128,
        csv_path=args.csv,
    )
    if args.backend and len(args.backend) > 1:
        throughput.throughput_across_backends(args.backend, **kwargs)
    else:
        throughput.throughput_matrix(**kwargs)
    if args.csv:
        print(f"keras-tpugan: wrote {args.csv}")
    return 0


def _weak_scaling(args):
    from keras_tpugan.bench.scaling import weak_scaling

    xla = args.xla or ["auto"]
    for flag, values in (("--precisions", args.precisions), ("--xla", xla)):
        if len(values) != 1:
            raise ValueError(
                f"Expected one value of {flag} with --processes. Received: "
                f"{' '.join(values)}. For example --precisions float32 --xla on."
            )
    weak_scaling(
        processes=args.processes,
        batch_size=(args.batch_sizes or [64])[0],
        precision=args.precisions[0],
        xla=_XLA[xla[0]],
        steps=args.steps or 20,
        repeats=args.repeats,
        width=args.width or 64,
        latent_dim=args.latent_dim or 64,
        all_reduce_dtype=args.all_reduce_dtype,
        csv_path=args.csv,
    )
    if args.csv:
        print(f"keras-tpugan: wrote {args.csv}")
    return 0


def _peers(args):
    from keras_tpugan.bench import peers, step_profile, tables
    from keras_tpugan.runs import results

    if args.profile:
        rows = step_profile.profile_modes(
            batch_sizes=args.batch_sizes or [16, 128],
            steps=args.steps or 16,
            width=args.width or 128,
        )
        for line in tables.profile_table(rows):
            print(line)
        if args.csv:
            results.write_csv(rows, args.csv)
            print(f"keras-tpugan: wrote {args.csv}")
        return 0
    peers.peers_table(
        batch_sizes=args.batch_sizes or [16, 64, 128, 512],
        steps=args.steps,
        rounds=args.repeats,
        width=args.width or 128,
        csv_path=args.csv,
    )
    if args.csv:
        print(f"keras-tpugan: wrote {args.csv}")
    return 0


COMMANDS = {"bench": _bench}
