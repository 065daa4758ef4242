"""The run's final FID: its generator against its own data, on the standard
FID network, for any data (grey or RGB, labelled or not).

`train` calls `final_fid` once, after the last epoch. With `fid_images`
left at None the figure is computed on 10,000 images a side when that
costs at most a share of the run's training time, and otherwise skipped
with the reason (a CPU puts about 16 images a second through the
network; an accelerator thousands); a number asks for exactly that many,
whatever it costs. The real images' statistics are cached
(`fid_between.statistics_path`), so a second run on the same data pays
for its own images only.
"""

import time

from keras_tpugan import metrics
from keras_tpugan.runs import fid_between as fid_lib
from keras_tpugan.runs.config_checks import check_fid_images
from keras_tpugan.runs.sample import generate

# The published protocol uses 50,000; 10,000 is the usual figure during
# development (its bias against 50,000 is small beside runs' differences).
DEFAULT_FID_IMAGES = 10_000
# More images a second than any one device puts through the network today:
# a budget under num / this cannot be met, and nothing is built to find out.
FASTEST_IMAGES_PER_SEC = 10_000
# Images in the small batch timed first when the default's cost is weighed.
PROBE_IMAGES = 8


def final_fid(
    generator_path,
    image_source,
    num=None,
    seed=0,
    train_seconds=None,
    max_share=0.1,
    batch_size=50,
    network=None,
    skipped=None,
):
    """The FID of a run's generator against its data, or why it was skipped.

    Args:
        generator_path: The run's `generator.keras` (or a GAN's `.keras`).
        image_source: The run's `keras_tpugan.data.ImageSource`.
        num: Images a side (the real ones: at most this many of the data,
            a subset drawn from `seed`). None: `DEFAULT_FID_IMAGES` when they
            cost at most `max_share` of `train_seconds`, else skipped; 0:
            off.
        seed: Seed of the generated images' latents and the real subset.
        train_seconds: The run's training time, which the cost is weighed
            against when `num` is None.
        max_share: The share of `train_seconds` the default may cost (None:
            any).
        batch_size: Images per batch through the network.
        network: A `metrics.FIDInception` to use (None: one is built when
            needed, from the weights `metrics.fid_weights_path` finds).
        skipped: The caller's reason not to score (an unfinished run), or
            None; returned as `final_fid_skipped` unless `num` is 0.

    Returns:
        A dict: `fid_images` (asked for, or the default), `final_fid`
        (None when skipped), `final_fid_real_images` (real images the
        statistics hold), `final_fid_seconds` and `final_fid_skipped` (the
        reason, or None).

    Example:

    ```python
    result = final_fid("runs/demo/generator.keras", config.image_source())
    ```
    """
    check_fid_images(num)
    asked = DEFAULT_FID_IMAGES if num is None else num
    out = {
        "fid_images": asked,
        "final_fid": None,
        "final_fid_real_images": None,
        "final_fid_seconds": None,
        "final_fid_skipped": None,
    }
    if asked == 0:
        return {**out, "final_fid_skipped": "off (fid_images=0)"}
    if skipped:
        return {**out, "final_fid_skipped": skipped}
    started = time.perf_counter()
    try:
        weights = metrics.fid_weights_path()
    except ValueError as e:
        return {**out, "final_fid_skipped": f"no weights for the FID network: {e}"}
    cached = _real_cached(image_source, asked, seed)
    sides = 1 if cached else 2
    budget = None
    if num is None and max_share is not None and train_seconds is not None:
        budget = max_share * train_seconds
        if asked * sides / FASTEST_IMAGES_PER_SEC > budget:
            return {**out, "final_fid_skipped": _too_costly(asked, sides, budget)}
    if network is None:
        network = metrics.FIDInception(weights, batch_size=batch_size)
    if budget is not None:
        # A full batch takes at least as long as a small one, so a small
        # batch's time bounds the rate from above: a CPU is found too slow
        # after a few images, and only a bound within budget is checked on
        # a full batch.
        for probe in sorted(
            {min(PROBE_IMAGES, network.batch_size), network.batch_size}
        ):
            rate = _images_per_sec(network, generator_path, seed, probe)
            projected = time.perf_counter() - started + asked * sides / rate
            if projected > budget:
                bound = probe < network.batch_size
                return {
                    **out,
                    "final_fid_skipped": _too_costly(asked, sides, budget, rate, bound),
                    "final_fid_seconds": time.perf_counter() - started,
                }
    result = fid_lib.fid_between(
        generator_path, image_source, num=asked, seed=seed, network=network
    )
    return {
        **out,
        "final_fid": result["fid"],
        "final_fid_real_images": result["images"][1],
        "final_fid_seconds": time.perf_counter() - started,
    }


def _real_cached(image_source, num, seed):
    path = fid_lib.statistics_path(image_source, num, seed=seed)
    return path is not None and fid_lib.read_statistics(path) is not None


def _images_per_sec(network, generator_path, seed, probe):
    """`network.batch_size` images over the time of a batch of `probe`
    images (timed after a first batch that traces it): the network's
    images/s here when `probe` is its batch size, and at most that
    otherwise."""
    generator = fid_lib.cached_generator(generator_path)
    images, _ = generate(generator, 2 * probe, seed=seed)
    network.features(images[:probe])
    timed = time.perf_counter()
    network.features(images[probe:])
    return network.batch_size / max(time.perf_counter() - timed, 1e-9)


def _too_costly(num, sides, budget, rate=None, bound=False):
    if rate is None:
        speed = f"at least {num * sides / FASTEST_IMAGES_PER_SEC:,.1f} s on any device"
    elif bound:
        speed = (
            f"at least {num * sides / rate:,.0f} s at under {rate:,.1f} images/s here"
        )
    else:
        speed = f"about {num * sides / rate:,.0f} s at {rate:,.1f} images/s here"
    which = "generated and real" if sides == 2 else "generated"
    return (
        f"{num:,} {which} images would take {speed}, over the {budget:,.1f} s "
        "the run's quality share allows; set --fid-images N (fid_images=N) "
        "to score N images a side whatever it costs, or run keras-tpugan fid "
        "on the run folder later"
    )
