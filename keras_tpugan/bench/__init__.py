"""The lab's speed measurements.

`throughput` (images/s per precision, XLA, replicas and batch), `peers`
(against the loops users write), `step_profile` (where a step's time goes),
`scaling` (weak scaling over processes) and `accelerator` (the prepared run
for a GPU or TPU). Built on `runs`; independent of `studies`.
"""
