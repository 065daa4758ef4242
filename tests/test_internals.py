"""The Keras and TensorFlow internals the package uses are all in
`keras_tpugan/internals.py`, and each is still there in these versions: a
failure here names the entry to revisit after an upgrade."""

import inspect
import pathlib
import re

import pytest

import keras_tpugan as ktg
from keras_tpugan import internals

pytestmark = pytest.mark.both_backends

PACKAGE = pathlib.Path(ktg.__file__).parent

# What reaches into a library's private modules or names (comments and
# docstrings aside): imports of its private packages, and the private
# attributes of Keras's or TensorFlow's objects the package has used.
PRIVATE = re.compile(
    r"^\s*(from|import)\s+(keras\.src|tensorflow\.python|tensorflow\.compiler)"
    r"|\._(flatten_layers|maybe_symbolic_build|make_function"
    r"|inner_optimizers|check_health_initial_timeout|use_cached_eval_dataset)\b"
    r"|context\(\)\.configure_coordination_service\("
    r"|\.__class__\s*=|getrefcount\("
)


def _code_lines(path):
    """The lines of `path` that are code: docstrings and comments dropped."""
    text = path.read_text()
    text = re.sub(r'"""(.|\n)*?"""', lambda m: "\n" * m.group(0).count("\n"), text)
    return [line.split("#")[0] for line in text.splitlines()]


def test_internals_are_used_in_internals_py_only():
    found = {
        f"{path.relative_to(PACKAGE)}:{number}: {line.strip()}"
        for path in PACKAGE.rglob("*.py")
        if path.name != "internals.py"
        for number, line in enumerate(_code_lines(path), 1)
        if PRIVATE.search(line)
    }
    assert found == set()
    # And internals.py does use each of them.
    own = "\n".join(_code_lines(PACKAGE / "internals.py"))
    for name in ("keras.src", "_maybe_symbolic_build", "_make_function"):
        assert name in own


def test_1_keras_has_its_metrics_list_type():
    assert internals.MetricsList is not None, (
        "internals 1: keras.src.trainers.compile_utils.MetricsList is gone; "
        "Keras's callbacks can no longer learn the scores' directions from it"
    )
    from keras.src.callbacks import monitor_callback

    assert "MetricsList" in inspect.getsource(monitor_callback), (
        "internals 1: MonitorCallback no longer looks into MetricsList"
    )


@pytest.mark.tensorflow_only
def test_2_3_the_tensorflow_trainer_has_the_hooked_methods():
    from keras.src.backend.tensorflow.trainer import TensorFlowTrainer

    build = inspect.signature(TensorFlowTrainer._maybe_symbolic_build)
    assert list(build.parameters) == ["self", "iterator", "data_batch"], (
        "internals 2: TensorFlowTrainer._maybe_symbolic_build changed"
    )
    make = inspect.signature(TensorFlowTrainer._make_function)
    assert list(make.parameters) == ["self", "step_function"], (
        "internals 3: TensorFlowTrainer._make_function changed"
    )
    assert 'reduction="auto"' in inspect.getsource(TensorFlowTrainer._make_function)
    # The GAN's step overrides both, from the one place.
    assert (
        ktg.GAN._maybe_symbolic_build
        is internals.TensorFlowTrainerHooks.__dict__["_maybe_symbolic_build"]
    )
    assert (
        ktg.GAN._make_function
        is internals.TensorFlowTrainerHooks.__dict__["_make_function"]
    )


@pytest.mark.tensorflow_only
def test_4_tensorflows_coordination_service_entries_exist():
    from tensorflow.compiler.xla.tsl.protobuf import coordination_config_pb2
    from tensorflow.python.distribute import (
        collective_all_reduce_strategy,
        multi_worker_util,
    )
    from tensorflow.python.eager import context

    extended = collective_all_reduce_strategy.CollectiveAllReduceExtended
    assert isinstance(extended._check_health_initial_timeout, int | float), (
        "internals 4: CollectiveAllReduceExtended._check_health_initial_timeout"
    )
    configure = inspect.signature(context.Context.configure_coordination_service)
    for name in (
        "service_type",
        "service_leader",
        "coordinated_jobs",
        "cluster_register_timeout_in_ms",
        "heartbeat_timeout_in_ms",
    ):
        assert name in configure.parameters, f"internals 4: {name}"
    assert callable(multi_worker_util.coordination_leader)
    assert coordination_config_pb2.CoordinatedJob(name="worker", num_tasks=2)


def test_5_a_list_of_iterators_knows_which_nobody_else_holds():
    class Iterator:
        pass

    kept, dropped = Iterator(), Iterator()
    held = [kept, Iterator()]
    del dropped
    assert [internals.held_by_list_only(it) for it in held] == [False, True]

    class Base:
        def __iter__(self):
            return iter([1, 2])

    seen = []
    extended = internals.extend_iter_in_place(Base(), lambda it: seen.append(it) or it)
    assert isinstance(extended, Base) and type(extended).__name__ == "Base"
    assert list(extended) == [1, 2] and len(seen) == 1
