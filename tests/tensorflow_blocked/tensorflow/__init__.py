"""Stands in for TensorFlow in the JAX test pass: importing it fails.

`make test` puts this folder first on `PYTHONPATH` for its JAX pass, so
that pass (and every process it starts) runs as on a machine without
TensorFlow: any import of TensorFlow on the JAX path fails the tests.
"""

raise ImportError("No module named 'tensorflow' (blocked in the JAX test pass)")
