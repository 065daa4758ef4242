"""Sample-quality metrics that work offline.

`scores` holds the maths (`frechet_distance`, `classifier_score`,
`kernel_distance`, `precision_recall`); `classifiers` the networks they are
computed on (the shipped MNIST classifier, a classifier of a run's own
classes, Keras's InceptionV3 features), their training and their cache.
"""

from keras_tpugan.metrics.classifiers import (
    CLASSIFIER_FILE,
    CLASSIFIER_VERSION,
    MIN_ACCURACY,
    SHIPPED_CLASSIFIER,
    cache_dir,
    classifier_outputs,
    classifier_path,
    data_classifier,
    held_out_indices,
    inception_features,
    mnist_classifier,
    offline_mnist_reference,
)
from keras_tpugan.metrics.scores import (
    classifier_score,
    frechet_distance,
    kernel_distance,
    precision_recall,
)

__all__ = [
    "CLASSIFIER_FILE",
    "CLASSIFIER_VERSION",
    "MIN_ACCURACY",
    "SHIPPED_CLASSIFIER",
    "cache_dir",
    "classifier_outputs",
    "classifier_path",
    "classifier_score",
    "data_classifier",
    "frechet_distance",
    "held_out_indices",
    "inception_features",
    "kernel_distance",
    "mnist_classifier",
    "offline_mnist_reference",
    "precision_recall",
]
