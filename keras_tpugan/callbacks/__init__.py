"""Callbacks that show a GAN learning, score it and guard it."""

from keras_tpugan.callbacks.divergence_guard import DivergenceGuard
from keras_tpugan.callbacks.gan_callback import GANCallback
from keras_tpugan.callbacks.image_schedule import ImageSchedule
from keras_tpugan.callbacks.loss_curves import LossCurves
from keras_tpugan.callbacks.quality_metrics import QualityMetrics
from keras_tpugan.callbacks.sample_grid import SampleGrid
from keras_tpugan.callbacks.throughput import Throughput
from keras_tpugan.callbacks.time_budget import TimeBudget

__all__ = [
    "DivergenceGuard",
    "GANCallback",
    "ImageSchedule",
    "LossCurves",
    "QualityMetrics",
    "SampleGrid",
    "Throughput",
    "TimeBudget",
]
