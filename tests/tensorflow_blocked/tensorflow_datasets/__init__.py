"""Stands in for TensorFlow Datasets in the JAX test pass: importing it fails.

See `tests/tensorflow_blocked/tensorflow/__init__.py`.
"""

raise ImportError(
    "No module named 'tensorflow_datasets' (blocked in the JAX test pass)"
)
