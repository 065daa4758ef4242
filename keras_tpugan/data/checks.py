"""Checks of what `load_images` and `read_images` were given, and the info
dict they return."""

import os

from keras_tpugan.tf_import import is_dataset


def check_labels(labels, labelled, info):
    if labels and not labelled:
        raise ValueError(
            f"Expected labelled data with labels=True. Received: {info['name']!r} "
            f"({info['source']}), which has no labels. "
            + (
                "Put each class's images in a subfolder of its own, or train "
                "without labels (conditional=False)."
                if info["source"] == "folder"
                else "Name its label feature with `label_key`, or train "
                "without labels (conditional=False)."
            )
        )


def check_batch_size(batch_size, n, info):
    if n < batch_size:
        raise ValueError(
            f"Expected batch_size <= the {n} images of {info['name']!r} "
            f"({info['source']}). Received: batch_size={batch_size}; with "
            "drop_remainder=True the dataset would yield nothing. Use a "
            "smaller batch size."
        )


def describe(data):
    """A short description of `data` for error messages."""
    if isinstance(data, str) and os.path.isdir(data):
        return f"the folder {data!r}"
    if isinstance(data, str):
        return f"{data!r} (a dataset name, or no such folder)"
    if is_dataset(data):
        return "a tf.data.Dataset"
    return f"a {type(data).__name__}"


def info_dict(source, name, class_ids, class_names=None, num_classes=None):
    if class_ids is not None and num_classes is None:
        num_classes = len(class_names) if class_names else int(class_ids.max()) + 1
    return {
        "source": source,
        "name": name,
        "num_examples": None,
        "image_shape": None,
        "num_classes": num_classes,
        "class_names": None if class_names is None else list(class_names),
        "memory_bytes": None,
    }
