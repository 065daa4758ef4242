"""The lab's runs: one training run from a config.

`config` (`TrainConfig` and its presets), `prepared_run` (the data, strategy
and GAN a config asks for), `train` (the run and its files), `sample` (grids
from a saved generator) and `results` (the CSV, JSON and Markdown writers).
Built on the library; imports nothing else of the lab.
"""
