# The two commands of the README, and a few conveniences for development.
#   make run    install what building and running needs (not the test tools), build the `trellis`
#               binary alone (Release, no tests), run the main job on the default model, then a
#               short `bench phi` that measures what the prefix cache saves
#   make serve  the same set-up, then the OpenAI-compatible server on the default model (it
#               prints the address of its chat page: http://127.0.0.1:8080/)
#   make deb    build the Debian package build-deb/trellis_VERSION_ARCH.deb (the binary, a systemd
#               unit for `trellis serve` reading /etc/trellis/serve.conf, the trellis user);
#               scripts/deb-check.sh installs, runs and removes it
#   make test   install everything, build everything with -Werror, run every test, then again under
#               AddressSanitizer + UndefinedBehaviorSanitizer, the concurrent parts under
#               ThreadSanitizer, the NEON kernels cross-built for AArch64 and run under qemu,
#               then fuzz the GGUF reader for 60 s

JOBS ?= $(shell nproc)
BUILD ?= build
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
# Test binaries of code that runs on several threads; they run again under ThreadSanitizer.
TSAN_TESTS ?= thread_pool_test engine_test engine_stress_test engine_alloc_test server_test \
  server_load_test server_hostile_test engine_pipeline_test router_test disk_tier_test \
  engine_disk_tier_test engine_loop_test engine_grammar_test engine_speculation_test \
  server_embeddings_test model_hub_test
FUZZ_SECONDS ?= 60
# The sanitizer runs repeat the stress tests' random rounds this fraction of the times
# (TRELLIS_TEST_SCALE, read by tests/test_support.h's scaled_count): the same code paths, fewer
# repetitions of each.
SANITIZER_TEST_SCALE ?= 0.25

.PHONY: run demo serve test run-deps deps cli build deb unit-test asan-test tsan-test arm-check fuzz \
  clean

# `make run MODEL=path/to/model.gguf` runs the main job on a real model instead.
MODEL ?=
run: run-deps cli
	@$(MAKE) --no-print-directory demo

# The main job on the binary as built (no set-up): the demo, then a short bench phi.
demo:
	$(BUILD)/cli/trellis demo $(if $(MODEL),-m $(MODEL),)
	@echo "== what the prefix cache saves: a short bench phi (cache off and on, same run)"
	$(BUILD)/cli/trellis bench phi $(if $(MODEL),-m $(MODEL),) -L 256 -D 8 -N 2 --phi 0,0.5,max \
	  --out bench-results/readme-phi

# `make serve [MODEL=...] [SERVE_ARGS="--port 8080 --api-key KEY"]`: the OpenAI-compatible server.
SERVE_ARGS ?=
serve: run-deps cli
	$(BUILD)/cli/trellis serve $(if $(MODEL),-m $(MODEL),) $(SERVE_ARGS)

test: deps unit-test asan-test tsan-test arm-check fuzz

# What building and running `trellis` needs; `deps`: that and what the tests need.
run-deps:
	@scripts/install-deps.sh run

deps:
	@scripts/install-deps.sh all

# The same configuration as `build` (so switching between them recompiles nothing) without the
# tests and benches, whose libraries (GoogleTest, Google Benchmark) it then does not need; only
# the `trellis` binary and what it links are compiled.
cli:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DTRELLIS_WERROR=ON \
	  -DTRELLIS_BUILD_TESTS=OFF -DTRELLIS_BUILD_BENCH=OFF
	cmake --build $(BUILD) -j$(JOBS) --target trellis_cli

DEB_BUILD ?= build-deb
deb:
	@scripts/install-deps.sh deb
	cmake -S . -B $(DEB_BUILD) -DCMAKE_BUILD_TYPE=Release -DTRELLIS_WERROR=ON \
	  -DTRELLIS_BUILD_TESTS=OFF -DTRELLIS_BUILD_BENCH=OFF
	cmake --build $(DEB_BUILD) -j$(JOBS) --target trellis_cli
	cd $(DEB_BUILD) && cpack -G DEB

build:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DTRELLIS_WERROR=ON \
	  -DTRELLIS_BUILD_TESTS=ON -DTRELLIS_BUILD_BENCH=ON
	cmake --build $(BUILD) -j$(JOBS)

unit-test: build
	scripts/setup-node-client.sh $(BUILD)/node
	scripts/setup-browser-test.sh $(BUILD)/node
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS)

asan-test:
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DTRELLIS_WERROR=ON -DTRELLIS_SANITIZE=ON \
	  -DTRELLIS_BUILD_BENCH=OFF
	cmake --build $(ASAN_BUILD) -j$(JOBS)
	cd $(ASAN_BUILD) && TRELLIS_TEST_SCALE=$(SANITIZER_TEST_SCALE) ctest --output-on-failure -j$(JOBS)

tsan-test:
	cmake -S . -B $(TSAN_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTRELLIS_WERROR=ON -DTRELLIS_TSAN=ON \
	  -DTRELLIS_BUILD_BENCH=OFF
	cmake --build $(TSAN_BUILD) -j$(JOBS) --target $(TSAN_TESTS)
	set -e; for t in $(TSAN_TESTS); do \
	  TRELLIS_TEST_SCALE=$(SANITIZER_TEST_SCALE) TSAN_OPTIONS=suppressions=$(CURDIR)/tests/tsan.supp \
	  $(TSAN_BUILD)/tests/$$t; done

arm-check:
	scripts/arm-check.sh

fuzz:
	scripts/fuzz.sh $(FUZZ_SECONDS)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD) build-fuzz build-arm
