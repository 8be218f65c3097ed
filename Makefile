# The two commands of the README. Both work on a fresh machine with only python3.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test setup bench clean chromium

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

setup: $(STAMP)

run: $(STAMP)
	$(BIN)/widetable serve --data ./data --port 8080 --bigtable-port 8086

# Headless Chromium for the Key Visualizer browser test (Debian's package), only when missing.
chromium:
	@test -x /usr/bin/chromium || (apt-get update && apt-get install -y chromium)

test: $(STAMP) chromium
	$(BIN)/python -m pytest -q

bench: $(STAMP)
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) data .pytest_cache
