# The two set-up commands for a fresh machine are `make up` and `make test`; each installs what it needs.
SHELL := /bin/bash
SEEDS ?= 200
FROM ?= 1
TAP := npx tap --disable-coverage --allow-empty-coverage --jobs=2 --timeout=300

.PHONY: install build test test-unit sim mutations up down bench jepsen clean

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund
	touch $@

install: node_modules/.installed

build: install
	npx tsc -b

TEST_FILES = $$(find packages cluster bench jepsen-like -path '*/dist/test/*' -name '*.test.js' -not -path '*/node_modules/*' 2>/dev/null | sort)

# Unit and integration tests (real processes on loopback), then 500 simulator seeds and the mutation check.
test: build
	$(TAP) $(TEST_FILES)
	node packages/raft/dist/sim/run.js --seeds 500 --from 1 --jobs 2
	node packages/raft/dist/sim/mutations.js

# make sim SEEDS=N FROM=S: seeds S..S+N-1; ends with "N passed, M failed".
sim: build
	node packages/raft/dist/sim/run.js --seeds $(SEEDS) --from $(FROM)

mutations: build
	node packages/raft/dist/sim/mutations.js

# Start every service's 5-member cluster (LevelDB under data/) and print the endpoints.
up: build
	scripts/up-all.sh

down:
	scripts/down-all.sh

bench: build
	node bench/dist/raft-inprocess.js

clean:
	rm -rf packages/*/dist bench/dist cluster/dist jepsen-like/dist
