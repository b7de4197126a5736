# The two set-up commands for a fresh machine are `make up` and `make test`; each installs what it needs.
SHELL := /bin/bash
# A failing command piped into tee still fails the recipe.
.SHELLFLAGS := -o pipefail -c
SEEDS ?= 200
FROM ?= 1
TAP := npx tap --disable-coverage --allow-empty-coverage --jobs=2 --timeout=300

.PHONY: test-packages media-packages install build test check test-unit sim mutations up down bench jepsen clean container

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund
	touch $@

install: node_modules/.installed

build: install
	npx tsc -b
	node scripts/build-web.mjs packages/services/collab/web packages/services/video/web cluster/web

TEST_FILES = $$(find packages cluster bench jepsen-like -path '*/dist/test/*' -name '*.test.js' -not -path '*/node_modules/*' 2>/dev/null | sort)

# Unit and integration tests (real processes on loopback), 500 simulator seeds, the mutation check, and
# jepsen-like smoke runs of kv, lock, the short-link allocator, the event log, the editor, the auction, the flash
# sale, the rate limiter, the feed, notifications and video under partitions, kills and pauses (and clock steps for
# the auction; wipes of members and counter stores for the rate limiter, of a member and an object store for video;
# the kills and pauses of the last four also hit a store, a router or the delivery worker).
# The last line counts everything: tap assertions, simulator seeds, mutations caught, smoke runs.
test: build test-packages
	@mkdir -p jepsen-out
	$(TAP) $(TEST_FILES) | tee jepsen-out/tap.log
	@scripts/slowest-tests.sh jepsen-out/tap.log 12
	node packages/lib/raft/dist/sim/run.js --seeds 500 --from 1 --jobs 2 | tee jepsen-out/sim.log
	node packages/lib/raft/dist/sim/mutations.js | tee jepsen-out/mutations.log
	scripts/smokes.sh
	@tap=$$(grep -oE '# \{ total: [0-9]+, pass: [0-9]+' jepsen-out/tap.log | tail -1 | grep -oE '[0-9]+$$'); \
	seeds=$$(grep -oE '^[0-9]+ passed' jepsen-out/sim.log | tail -1 | grep -oE '^[0-9]+'); \
	caught=$$(grep -c 'CAUGHT' jepsen-out/mutations.log); \
	smokes=$$(grep -l '^0$$' jepsen-out/smoke-*.status | wc -l); \
	echo "make test: $$tap tap assertions, $$seeds simulator seeds, $$caught mutations caught, $$smokes jepsen-like smoke runs"; \
	echo "total: $$((tap + seeds + caught + smokes)) passed, 0 failed"

# The quick loop beside `make test`, under 3 minutes on 2 cores: the type-check, Biome's formatting and lint check
# (biome.jsonc; `npm run fix` applies the formatting and safe fixes), and the unit tests: every test file except those
# in scripts/integration-tests.txt (clusters, browsers, Debian programs, anything over about 3 s). Installs nothing
# from Debian.
check: install
	npx tsc -b
	npx biome ci --error-on-warnings --colors=off .
	$(TAP) $$(scripts/unit-tests.sh)

# The benchmark peers' own tests run real nginx and redis-server, and the Raft TLS test makes its certificates with
# openssl (Debian packages): installed here, once, when missing, rather than by test files racing for apt's lock.
test-packages:
	scripts/ensure-debian.sh nginx:/usr/sbin/nginx redis-server:/usr/bin/redis-server openssl:/usr/bin/openssl nats-server:/usr/sbin/nats-server chromium:/usr/bin/chromium iproute2:/usr/sbin/ip systemd:/usr/bin/systemd-analyze $(MEDIA_PACKAGES) flite:/usr/bin/flite espeak-ng:/usr/bin/espeak-ng
	scripts/ensure-podman.sh

# What the video service runs on (transcoding, probing, captions): needed by `make up` as much as by the tests.
MEDIA_PACKAGES := ffmpeg:/usr/bin/ffmpeg pocketsphinx:/usr/bin/pocketsphinx_continuous pocketsphinx-en-us:/usr/share/pocketsphinx/model/en-us/en-us
media-packages:
	scripts/ensure-debian.sh $(MEDIA_PACKAGES)

# The member image built the long way, from the sources inside it (deploy/Dockerfile's default target: npm ci,
# tsc -b), on a base made from Debian's mirror, and run as three TLS members in podman containers, one killed
# (cluster/test/container.test.ts; `make test` runs it on the image's prebuilt target). docs/deployment.md, section 5.
container: build
	scripts/ensure-podman.sh
	CONTAINER_TARGET=member npx tap --disable-coverage --allow-empty-coverage --timeout=900 cluster/dist/test/container.test.js

# make sim SEEDS=N FROM=S: seeds S..S+N-1; ends with "N passed, M failed".
sim: build
	node packages/lib/raft/dist/sim/run.js --seeds $(SEEDS) --from $(FROM)

mutations: build
	node packages/lib/raft/dist/sim/mutations.js

# Start every service's 5-member cluster (LevelDB under data/, each with its own token) and the dashboard; ends with
# one table of the clusters and the dashboard's address. `make up SERVICES="kv lock"` starts only those.
SERVICES ?=
up: build media-packages
	@SERVICES='$(SERVICES)' scripts/up-all.sh

down:
	@scripts/down-all.sh

# make jepsen: every workload under every nemesis, JEPSEN_TIME seconds each, then a summary table. Reports in
# $(JEPSEN_OUT)/<workload>-<nemesis>/report.html. Fails if any run is not valid. See jepsen-like/README.md.
JEPSEN_TIME ?= 180
JEPSEN_SEED ?= 1
JEPSEN_OUT ?= jepsen-out
JEPSEN_WORKLOADS ?= kv lock shortlink log collab auction flash ratelimit feed notify video
JEPSEN_NEMESES ?= partition kill pause packet clock quiet partition,kill,pause,packet,clock,quiet
# wipe (a member's data deleted, the member removed and added back) runs on the services of one Raft group only;
# for feed it wipes a store partition only (its members host many groups), for video a member and one of its object stores.
JEPSEN_WIPE_WORKLOADS ?= kv lock shortlink ratelimit feed video

jepsen: build
	@failed=0; for w in $(JEPSEN_WORKLOADS); do for n in $(JEPSEN_NEMESES); do \
	  name="$$w-$$(echo $$n | tr ',' '+')"; echo "== jepsen-like: $$w under $$n ($(JEPSEN_TIME) s)"; \
	  node jepsen-like/bin/jepsen-like.js run --service $$w --time $(JEPSEN_TIME) --nemesis $$n --seed $(JEPSEN_SEED) --out $(JEPSEN_OUT)/$$name || failed=$$((failed + 1)); \
	done; done; \
	for w in $(JEPSEN_WIPE_WORKLOADS); do for n in wipe partition,kill,pause,wipe,quiet; do \
	  name="$$w-$$(echo $$n | tr ',' '+')"; echo "== jepsen-like: $$w under $$n ($(JEPSEN_TIME) s)"; \
	  node jepsen-like/bin/jepsen-like.js run --service $$w --time $(JEPSEN_TIME) --nemesis $$n --seed $(JEPSEN_SEED) --out $(JEPSEN_OUT)/$$name || failed=$$((failed + 1)); \
	done; done; \
	node jepsen-like/bin/jepsen-like.js summary $(JEPSEN_OUT); \
	test $$failed -eq 0

# Benchmarks beside their peers (etcd is installed from Debian when missing); figures go to bench/results/.
bench: build test-packages
	npx bench raft --duration 10 --rounds 3
	npx bench kv --vs etcd --duration 20 --concurrency 64 --rounds 3
	npx bench lock --vs etcd --duration 15 --concurrency 128 --rate 10000
	npx bench shortlink --duration 10 --concurrency 64 --rounds 3
	npx bench ratelimit --vs redis --duration 10 --concurrency 64 --rounds 3
	npx bench groups --duration 10 --concurrency 256
	npx bench log --vs jetstream --duration 10 --concurrency 64 --rounds 3
	npx bench collab --vs y-websocket
	npx bench flash --vs redis --duration 10 --concurrency 128
	npx bench auction --vs ws-broadcast --duration 30
	npx bench video --vs ffmpeg-ladder,nginx
	npx bench feed --vs push-only
	npx bench notify --vs fifo

clean:
	rm -rf packages/*/*/dist bench/dist cluster/dist jepsen-like/dist
