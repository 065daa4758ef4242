"""A metric classifier cached with its record: written whole, read only whole.

The model (`NAME.keras`) and its record (`NAME.json`: test accuracy,
settings, the model file's SHA-256) are each written under a temporary
name and renamed into place (`whole_files.replaced_whole`), both only
once both are written. The checksum tells a pair cut apart by a kill
between the two renames from a whole one.
"""

import json
import logging
import os

import keras

from keras_tpugan.whole_files import file_sha256, replaced_whole

logger = logging.getLogger("keras_tpugan")


def record_path(model_path):
    """The JSON record kept beside a classifier's `.keras` file."""
    return model_path.replace(".keras", ".json")


def save_classifier(model, record, path):
    """Caches a metric classifier at `path` and its record beside it.

    The processes of a run that train the same classifier at once into one
    cache never read a half-written file, and a failed write leaves no file
    behind.

    Returns:
        The record as written (with the model file's `sha256`).
    """
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with replaced_whole(path) as partial:
        model.save(partial)
        record = dict(record, sha256=file_sha256(partial))
        # Renamed into place before the model: a kill between the two leaves
        # a record whose checksum the file beside it does not match.
        with replaced_whole(record_path(path)) as partial_record:
            with open(partial_record, "w") as f:
                json.dump(record, f, indent=2)
    return record


def cached_classifier(path, load=True):
    """`(model, record)` of the classifier cached at `path`, or None.

    None when it is not there, and, with one warning line, when it is
    not whole: a record that does not parse, a model file whose SHA-256
    is not the record's (a write cut short), or one Keras cannot load.
    The caller then trains it again. With `load=False` the model is not
    loaded (`(None, record)`).
    """
    record_file = record_path(path)
    if not (os.path.exists(path) and os.path.exists(record_file)):
        return None
    try:
        with open(record_file) as f:
            record = json.load(f)
        expected = record.get("sha256")
        if expected is not None and file_sha256(path) != expected:
            raise ValueError(f"{path} does not match the SHA-256 in {record_file}")
        return (keras.saving.load_model(path) if load else None), record
    except Exception as e:  # any damage: train it again
        logger.warning(
            "the cached metric classifier %s is not whole (%s); it is trained again",
            path,
            str(e).splitlines()[0] if str(e) else type(e).__name__,
        )
        return None
