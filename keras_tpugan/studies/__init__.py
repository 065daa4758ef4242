"""The lab's studies: many runs compared.

`sweep` (the batch-size study), `ablation` (a grid of recipes) and `tuning`
(the keras-tuner search over batch size and settings). Built on `runs`;
independent of `bench`.
"""
