"""The `keras-tpugan` command (`main`), above the rest of the lab.

`python -m keras_tpugan.cli` runs it too.
"""
