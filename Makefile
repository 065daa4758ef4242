# Two commands do all the set-up on a fresh machine:
#   make demo   trains the demo GAN on the offline MNIST subset (runs/demo/)
#   make test   runs ruff and the test suite: on TensorFlow, then its
#               both-backends part on JAX (4 host devices), sharing one cache,
#               each pass on every core (pytest-xdist)
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# One pytest-xdist worker per core; each test file stays on one worker (its
# module fixtures are built once).
PYTEST_ARGS ?= -q --durations=15 -n auto --dist loadfile

.PHONY: demo test lint install clean

$(BIN)/keras-tpugan: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[cpu,jax,test]"
	touch $@

install: $(BIN)/keras-tpugan

demo: install
	$(BIN)/keras-tpugan train --preset demo --out runs/demo

lint: install
	$(BIN)/ruff check keras_tpugan tests benchmarks notebooks
	$(BIN)/ruff format --check keras_tpugan tests benchmarks notebooks

test: lint
	cache=$$(mktemp -d) && \
	KERAS_TPUGAN_TEST_CACHE=$$cache KERAS_BACKEND=tensorflow $(BIN)/python -m pytest $(PYTEST_ARGS) && \
	KERAS_TPUGAN_TEST_CACHE=$$cache KERAS_BACKEND=jax $(BIN)/python -m pytest $(PYTEST_ARGS); \
	status=$$?; rm -rf $$cache; exit $$status

clean:
	rm -rf $(VENV) runs .pytest_cache
