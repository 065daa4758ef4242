"""Strategies (TensorFlow) and distributions (JAX), processes and sharding.

On the TensorFlow backend the GAN is built and compiled under a
`tf.distribute.Strategy`; on the JAX backend under a
`keras.distribution.DataParallel`. `get_strategy` returns the right one for
the backend Keras runs on, and both are used the same way:
`with strategy.scope(): ...` around building and compiling the GAN.

Modules: `strategy` (choosing one, replicas, scope), `placement`
(`Placement`: where a run trains, asked once), `cluster` (several
processes), `agreement` (the same settings and the chief's values on every
process), `sharding` (the data over processes, the global batch check),
`iterators` (deleting multi-process iterators safely, the exit protocol),
`lost` (a peer gone: one line, not an abort) and `tpu`. The
arrows run strategy -> cluster, tpu; sharding -> strategy, cluster,
iterators; cluster, iterators -> lost.
"""

from keras_tpugan.distribute.agreement import (
    check_same_settings,
    chief_values,
    every_process_ints,
)
from keras_tpugan.distribute.cluster import (
    COLLECTIVES,
    cluster_processes,
    is_chief,
    process_count,
    process_index,
)
from keras_tpugan.distribute.iterators import (
    EXIT_WAIT_SECONDS,
    end_process,
    finish_deletions,
    install_exit_handler,
    release_unused_iterators,
)
from keras_tpugan.distribute.lost import (
    leave_after_lost_process,
    lost_process,
)
from keras_tpugan.distribute.placement import Placement
from keras_tpugan.distribute.sharding import (
    check_global_batch,
    fitting,
    shard_over_processes,
    sharded_by_the_data,
)
from keras_tpugan.distribute.strategy import (
    KINDS,
    get_strategy,
    is_out_of_memory,
    num_replicas,
    scope,
    split_host_devices,
    strategy_name,
)
from keras_tpugan.distribute.tpu import (
    attached_tpu,
)

__all__ = [
    "Placement",
    "COLLECTIVES",
    "EXIT_WAIT_SECONDS",
    "KINDS",
    "attached_tpu",
    "check_global_batch",
    "check_same_settings",
    "chief_values",
    "cluster_processes",
    "end_process",
    "every_process_ints",
    "finish_deletions",
    "fitting",
    "get_strategy",
    "install_exit_handler",
    "is_chief",
    "is_out_of_memory",
    "leave_after_lost_process",
    "lost_process",
    "num_replicas",
    "process_count",
    "process_index",
    "release_unused_iterators",
    "scope",
    "shard_over_processes",
    "sharded_by_the_data",
    "split_host_devices",
    "strategy_name",
]
