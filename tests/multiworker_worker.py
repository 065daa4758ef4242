"""One worker of the multi-worker test: trains a tiny GAN, writes JSON results.

Run as `python multiworker_worker.py OUT.json` with TF_CONFIG set (several
workers) or with KIND=cpu (the one-replica reference).
"""

import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import keras_tpugan as ktg  # noqa: E402

strategy = ktg.distribute.get_strategy(os.environ.get("KIND", "multiworker"))
keras.utils.set_random_seed(1)
images = np.random.default_rng(0).uniform(-1, 1, (8, 28, 28, 1)).astype("float32")
with strategy.scope():
    gan = ktg.GAN(
        ktg.models.dcgan_generator(latent_dim=8, width=8),
        ktg.models.dcgan_discriminator(width=8),
        latent_dim=8,
    )
    gan.compile(jit_compile=True)
ds = tf.data.Dataset.from_tensor_slices(images).batch(8, drop_remainder=True).repeat(3)
history = gan.fit(ds, epochs=1, verbose=0)
with strategy.scope():  # what jit_compile="auto" picks under this strategy
    probe = ktg.GAN(
        ktg.models.dcgan_generator(latent_dim=8, width=8),
        ktg.models.dcgan_discriminator(width=8),
        latent_dim=8,
    )
    probe.compile(jit_compile="auto")
with open(sys.argv[1], "w") as f:
    json.dump(
        {
            "replicas": strategy.num_replicas_in_sync,
            "chief": ktg.distribute.is_chief(strategy),
            "logs": {k: float(v[-1]) for k, v in history.history.items()},
            "metrics": {k: float(v) for k, v in gan.get_metrics_result().items()},
            "auto_xla": probe.xla,
            "weights": [w.numpy().tolist() for w in gan.generator.weights],
        },
        f,
    )
