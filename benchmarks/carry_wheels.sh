#!/usr/bin/env bash
# Downloads, into one folder, the wheels a JAX-only machine needs to run
# keras-tpugan and benchmarks/accelerator.py: the project, Keras and their
# dependencies, minus what any JAX install already has (jax, jaxlib, numpy,
# scipy, ml_dtypes, opt_einsum). Prints the folder's size
# and the command that installs it there without an index.
#
# Usage: benchmarks/carry_wheels.sh [FOLDER] [PYTHON_VERSION] [PLATFORM]
#   FOLDER          default: wheels
#   PYTHON_VERSION  of the target machine, e.g. 3.11 (default: this python's)
#   PLATFORM        default: manylinux2014_x86_64 (aarch64 hosts:
#                   manylinux2014_aarch64)
set -euo pipefail
cd "$(dirname "$0")/.."
dest=${1:-wheels}
python=${PYTHON:-python3}
version=${2:-$($python -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')}
platform=${3:-manylinux2014_x86_64}
target=(--only-binary=:all: --python-version "$version" --platform "$platform")
rm -rf "$dest" && mkdir -p "$dest"
$python -m pip wheel --quiet --no-deps --wheel-dir "$dest" .
$python -m pip download --quiet --dest "$dest" "${target[@]}" \
    "keras>=3.15" "pillow>=9" "matplotlib>=3.7"
# What a JAX install brings itself.
rm -f "$dest"/jax-* "$dest"/jaxlib-* "$dest"/numpy-* "$dest"/scipy-* \
    "$dest"/ml_dtypes-* "$dest"/opt_einsum-*
du -sh "$dest"
ls "$dest"
echo "On the JAX machine (with jax installed), from the folder's parent:"
echo "  pip install --no-index --no-deps $dest/*.whl"
echo "  KERAS_BACKEND=jax python benchmarks/accelerator.py --out runs/accelerator"
