"""Walking a model's layers, nested models' included (their public `layers`)."""

import keras


def batch_normalizations(*models):
    """The `BatchNormalization` layers of `models`, nested models' included."""
    return [
        layer
        for model in models
        for layer in all_layers(model)
        if isinstance(layer, keras.layers.BatchNormalization)
    ]


def all_layers(model):
    """Every layer of a model, nested models' included (their `layers`)."""
    for layer in getattr(model, "layers", ()):
        yield layer
        yield from all_layers(layer)
