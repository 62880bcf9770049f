# Every target sets itself up: a virtual environment in .venv with torch pinned to 2.13.0.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: demo test test-fast test-slow layers tokenizers floors clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	echo "torch==2.13.0" > $(VENV)/constraints.txt
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c $(VENV)/constraints.txt torch==2.13.0
	$(BIN)/python -m pip install --quiet -c $(VENV)/constraints.txt -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)  ## pretrain a small SMILES encoder with MLM on the built-in corpus
	$(BIN)/polymask train --modality smiles --objective mlm --out runs/demo --resume auto
	@echo "Next: benchmark runs/demo against its untrained twin and ECFP4 + random forest on MoleculeNet BBBP (3 seeds):"
	@echo "  $(BIN)/polymask benchmark moleculenet --checkpoint runs/demo --tasks bbbp --seeds 3"

test: layers  ## the layer contract, then the whole test suite
	$(BIN)/python -m pytest -q

test-fast: layers  ## the layer contract and the unit tests (seconds; no training runs)
	$(BIN)/python -m pytest -q -m "not slow and not integration"

layers: $(STAMP)  ## the import layers of docs/architecture.md (import-linter; an upward import fails)
	$(BIN)/lint-imports

test-slow: $(STAMP)  ## the slow tests (learning on text and DNA, MoleculeNet coverage, ...)
	$(BIN)/python -m pytest -q -m slow

tokenizers: $(STAMP)  ## rebuild the built-in tokenizers from the built-in corpora
	$(BIN)/polymask tokenizer train --modality smiles --out tokenizers/smiles
	$(BIN)/polymask tokenizer train --modality text --out tokenizers/text --vocab-size 8192
	$(BIN)/polymask tokenizer train --modality dna --out tokenizers/dna
	$(BIN)/polymask tokenizer train --modality dna --option overlapping=true --out tokenizers/dna-6mer-overlap

floors:  ## install the lowest declared dependency versions in build/floors and run a smoke test (~10 min)
	$(PYTHON) benchmarks/dependency_floors.py

clean:
	rm -rf $(VENV) runs build dist
