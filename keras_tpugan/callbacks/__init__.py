"""Callbacks that show a GAN learning: sample grids and learning curves."""

from keras_tpugan.callbacks.gan_callback import GANCallback
from keras_tpugan.callbacks.loss_curves import LossCurves
from keras_tpugan.callbacks.sample_grid import SampleGrid
from keras_tpugan.callbacks.throughput import Throughput

__all__ = ["GANCallback", "LossCurves", "SampleGrid", "Throughput"]
