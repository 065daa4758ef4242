"""Sample-quality metrics that work offline.

`scores` holds the maths (`frechet_distance`, `classifier_score`,
`kernel_distance`, `precision_recall`); `classifiers` the networks they are
computed on (the shipped MNIST classifier, a classifier of a run's own
classes), their training and their cache;
`fid_inception` the standard FID network (`FIDInception`) and
`fid_weights` where its weights come from.
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
    mnist_classifier,
    offline_mnist_reference,
)
from keras_tpugan.metrics.fid_inception import FIDInception, inception_features
from keras_tpugan.metrics.fid_weights import (
    FID_WEIGHTS_ENV,
    FID_WEIGHTS_SHA256,
    fid_weights_path,
)
from keras_tpugan.metrics.scores import (
    classifier_score,
    feature_statistics,
    frechet_distance,
    frechet_distance_of,
    kernel_distance,
    kernel_reference_terms,
    precision_recall,
)

__all__ = [
    "FIDInception",
    "FID_WEIGHTS_ENV",
    "FID_WEIGHTS_SHA256",
    "fid_weights_path",
    "CLASSIFIER_FILE",
    "CLASSIFIER_VERSION",
    "MIN_ACCURACY",
    "SHIPPED_CLASSIFIER",
    "cache_dir",
    "classifier_outputs",
    "classifier_path",
    "classifier_score",
    "data_classifier",
    "feature_statistics",
    "frechet_distance",
    "frechet_distance_of",
    "held_out_indices",
    "inception_features",
    "kernel_distance",
    "kernel_reference_terms",
    "mnist_classifier",
    "offline_mnist_reference",
    "precision_recall",
]
