"""`Placement`: where a run trains, asked of the strategy once."""

import dataclasses
from typing import Any

import keras

from keras_tpugan.distribute.agreement import check_same_settings
from keras_tpugan.distribute.cluster import is_chief, process_count, process_index
from keras_tpugan.distribute.sharding import check_global_batch
from keras_tpugan.distribute.strategy import get_strategy, num_replicas, strategy_name
from keras_tpugan.tf_import import tf


@dataclasses.dataclass(frozen=True, eq=False)
class Placement:
    """Where a run trains: one immutable value, made right after the strategy
    is chosen and passed on (to `prepare`, `train`, the callbacks and
    `summary.json`), so that nothing asks the strategy again.

    Args:
        strategy: The `tf.distribute.Strategy`, or on JAX the
            `keras.distribution.Distribution`.
        backend: `"tensorflow"` or `"jax"`.
        strategy_name: The strategy's class name (`strategy_name`).
        replicas: Replicas a global batch is split over, all processes
            together.
        processes: Processes that train together.
        process_index: This process's index (the chief's is 0).
        chief: Whether this process writes the run's files.
        device_kind: The kind of device the replicas run on (`"CPU"`,
            `"GPU"`, `"TPU"`, or JAX's name of the device, such as
            `"NVIDIA H200"`).

    Example:

    >>> import keras_tpugan as ktg
    >>> placement = ktg.distribute.Placement.of(ktg.distribute.get_strategy("cpu"))
    >>> placement.replicas, placement.processes, placement.chief
    (1, 1, True)
    """

    strategy: Any
    backend: str
    strategy_name: str
    replicas: int
    processes: int
    process_index: int
    chief: bool
    device_kind: str

    @classmethod
    def of(cls, strategy):
        """The placement of `strategy` (asked once, here).

        Args:
            strategy: A `tf.distribute.Strategy` or a
                `keras.distribution.Distribution`.

        Returns:
            A `Placement`.
        """
        return cls(
            strategy=strategy,
            backend=keras.backend.backend(),
            strategy_name=strategy_name(strategy),
            replicas=num_replicas(strategy),
            processes=process_count(strategy),
            process_index=process_index(strategy),
            chief=is_chief(strategy),
            device_kind=_device_kind(strategy),
        )

    @classmethod
    def choose(cls, settings, strategy=None, **strategy_options):
        """Sets up where a run trains: its one entry into `distribute`.

        Chooses the strategy (`get_strategy(**strategy_options)`) unless
        one is given, refuses a multi-process run whose processes were
        given different `settings` (`check_same_settings`), and returns the
        strategy's placement.

        Args:
            settings: A JSON-serializable dict of the run's settings (a
                `TrainConfig.to_dict()`), the same on every process.
            strategy: A `tf.distribute.Strategy` or, on JAX, a
                `keras.distribution.Distribution` (default: chosen from
                `strategy_options`).
            **strategy_options: `get_strategy`'s arguments (`kind`,
                `num_replicas`, `collective`, ...), used when no strategy
                is given.

        Returns:
            A `Placement`.

        Raises:
            ValueError: When the processes' settings differ, or for
                `get_strategy`'s bad options.

        Example:

        >>> import keras_tpugan as ktg
        >>> placement = ktg.distribute.Placement.choose({"seed": 0}, kind="cpu")
        >>> placement.strategy_name, placement.replicas
        ('OneDeviceStrategy', 1)
        """
        if strategy is None:
            strategy = get_strategy(**strategy_options)
        check_same_settings(settings, strategy)
        return cls.of(strategy)

    def check_global_batch(self, batch_size):
        """Refuses a global batch that does not split over the replicas.

        Args:
            batch_size: The global batch size.
        """
        check_global_batch(batch_size, self.strategy)

    def to_dict(self):
        """What `summary.json` records of the placement (no strategy object)."""
        return {
            "backend": self.backend,
            "strategy": self.strategy_name,
            "replicas": self.replicas,
            "processes": self.processes,
            "device_kind": self.device_kind,
        }


def _device_kind(strategy):
    if keras.backend.backend() == "jax":
        import jax

        # Keras's mesh may name its devices ("cpu:0"); JAX's mesh holds them.
        mesh = getattr(getattr(strategy, "device_mesh", None), "backend_mesh", None)
        device = jax.devices()[0] if mesh is None else mesh.devices.flat[0]
        return "CPU" if device.platform == "cpu" else device.device_kind
    if strategy is None or strategy_name(strategy) == "DefaultStrategy":
        # Which has no devices of its own: it places on the first
        # accelerator there is, else the CPU.
        kinds = {d.device_type for d in tf.config.list_logical_devices()}
        return next((k for k in ("TPU", "GPU") if k in kinds), "CPU")
    devices = strategy.extended.worker_devices
    return tf.DeviceSpec.from_string(devices[0]).device_type or "CPU"
