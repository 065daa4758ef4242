"""A rank of test_multiprocess's parity-and-resume test: `train`, resumed when OUT
holds a run, maybe killed.

Run under `keras-tpugan launch` as
`multiprocess_worker.py OUT [KILL_RANK KILL_EPOCH KILL_BATCH]`: every process
keeps its own backup (`train`'s `OUT/backup/process_N`) and, started again on
the same OUT, resumes from it (`resume=True`); the named rank SIGKILLs itself
after that batch of that epoch, printing the time first. Every process prints
the epochs it trains.
"""

import os
import signal
import sys
import time

import keras

from keras_tpugan.runs import config, train

RANK = int(os.environ["KERAS_TPUGAN_RANK"])
SETTINGS = [
    # Two epochs: a kill in the second leaves one whole epoch to resume from.
    "epochs=2",
    # A backup every epoch (the kill comes in the second), on the clock: due
    # after 60 microseconds, so that the processes take the chief's decision
    # (`chief_values`) at each epoch end, as a run with minutes does.
    "backup_minutes=0.000001",
    "quality_every=0",
    "batch_size=256",
    # The test compares one process with two on these: the
    # conditional GAN, two critic steps with the WGAN-GP penalty, XLA.
    "discriminator_steps=2",
    "gradient_penalty=wgan-gp",
    "conditional=true",
    "jit_compile=true",  # "auto" turns XLA off on two TensorFlow CPU processes
    # Adam divides each weight's step by that weight's own gradient scale: on
    # the few weights whose gradient is about zero it turns the rounding of
    # the sum over processes into steps. With Adam on TensorFlow, 17 of the
    # 25,088 weights of the generator's first layer ended up to 2.1e-5 apart
    # on one host (with or without XLA) and within 1e-5 on another
    # (docs/design/replicas.md). LARS scales each layer's step by the
    # layer's gradient norm, and the rounding stays rounding.
    "optimizer=lars",
    # Plumbing, not quality: the smallest networks, 4 steps an epoch and
    # 2 of validation.
    "width=8",
    "latent_dim=8",
    "split=train[:1024]",
    "validation_split=test[:512]",
    # The survivor names its lost peer after this much silence (the default
    # is 30 s, waited out by every run of the test).
    "heartbeat_timeout_seconds=10",
]


class KillSelf(keras.callbacks.Callback):
    def __init__(self, rank, epoch, batch):
        super().__init__()
        self.rank, self.epoch, self.batch = rank, epoch, batch
        self.current = None

    def on_epoch_begin(self, epoch, logs=None):
        self.current = epoch
        print(f"epoch {epoch}", flush=True)

    def on_train_batch_end(self, batch, logs=None):
        if (RANK, self.current, batch) == (self.rank, self.epoch, self.batch):
            print(f"killed at {time.time():.3f}", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)


out, *kill = sys.argv[1:]
callbacks = [KillSelf(*map(int, kill or (-1, -1, -1)))]
cfg = config.TrainConfig.preset("smoke").override(SETTINGS)
resume = os.path.exists(os.path.join(out, "config.json"))
train.train(cfg, out, verbose=0, extra_callbacks=callbacks, resume=resume)
