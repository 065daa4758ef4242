"""Files written whole or not at all, and checked when read.

`replaced_whole` writes a file under a temporary name and renames it into
place, so that a kill or a failed write leaves the previous version;
`file_sha256` is the checksum a record keeps of a file it vouches for (a
run's backup, a cached metric classifier). Free of Keras: the command
line's `--help` reaches it through the lab's results writer.
"""

import contextlib
import hashlib
import os


@contextlib.contextmanager
def replaced_whole(path):
    """Yields a temporary name beside `path` to write to, renamed to `path`
    once the block ends without an error.

    A kill or a failure during the write leaves `path` as it was (the
    rename is atomic on one filesystem) and no partial file behind. The
    temporary name keeps `path`'s extension (Keras saves `.keras` files
    only) and starts with a dot, so listings of the run's files skip it.

    Args:
        path: The file to write.

    Yields:
        The temporary path.

    Example:

    ```python
    with replaced_whole("runs/x/summary.json") as partial:
        with open(partial, "w") as f:
            json.dump(summary, f)
    ```
    """
    directory, name = os.path.split(os.fspath(path))
    stem, extension = os.path.splitext(name)
    partial = os.path.join(directory, f".{stem}.{os.getpid()}.partial{extension}")
    try:
        yield partial
        os.replace(partial, path)
    except OSError as e:
        # Name the file whose write failed (an error of the system, with its
        # errno: one without would print its filename in place of its words).
        if e.filename is None and e.errno is not None:
            e.filename = os.fspath(path)
        raise
    finally:
        if os.path.exists(partial):
            os.remove(partial)


def file_sha256(path):
    """The SHA-256 of the file at `path` (hex), read in blocks of 1 MiB.

    Args:
        path: The file.

    Returns:
        The hex digest, a str.
    """
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
