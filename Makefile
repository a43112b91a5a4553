# The two commands of the README, and a few conveniences for development.
#   make run    install what is missing, build Release, run the main job on the default model,
#               then a short `bench phi` that plots what the prefix cache saves
#   make serve  the same set-up, then the OpenAI-compatible server on the default model (it
#               prints the address of its chat page: http://127.0.0.1:8080/)
#   make test   install what is missing, build with -Werror, run every test, then again under
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
  engine_disk_tier_test
FUZZ_SECONDS ?= 60

.PHONY: run serve test deps build unit-test asan-test tsan-test arm-check fuzz clean

# `make run MODEL=path/to/model.gguf` runs the main job on a real model instead.
MODEL ?=
run: deps build
	$(BUILD)/cli/trellis demo $(if $(MODEL),-m $(MODEL),)
	@echo "== what the prefix cache saves: a short bench phi (cache off and on, same run)"
	$(BUILD)/cli/trellis bench phi $(if $(MODEL),-m $(MODEL),) -L 256 -D 8 -N 2 --phi 0,0.5,max \
	  --out bench-results/readme-phi

# `make serve [MODEL=...] [SERVE_ARGS="--port 8080 --api-key KEY"]`: the OpenAI-compatible server.
SERVE_ARGS ?=
serve: deps build
	$(BUILD)/cli/trellis serve $(if $(MODEL),-m $(MODEL),) $(SERVE_ARGS)

test: deps unit-test asan-test tsan-test arm-check fuzz

deps:
	@scripts/install-deps.sh

build:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DTRELLIS_WERROR=ON
	cmake --build $(BUILD) -j$(JOBS)

unit-test: build
	scripts/setup-node-client.sh $(BUILD)/node
	scripts/setup-browser-test.sh $(BUILD)/node
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS)

asan-test:
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DTRELLIS_WERROR=ON -DTRELLIS_SANITIZE=ON \
	  -DTRELLIS_BUILD_BENCH=OFF
	cmake --build $(ASAN_BUILD) -j$(JOBS)
	cd $(ASAN_BUILD) && ctest --output-on-failure -j$(JOBS)

tsan-test:
	cmake -S . -B $(TSAN_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTRELLIS_WERROR=ON -DTRELLIS_TSAN=ON \
	  -DTRELLIS_BUILD_BENCH=OFF
	cmake --build $(TSAN_BUILD) -j$(JOBS) --target $(TSAN_TESTS)
	set -e; for t in $(TSAN_TESTS); do \
	  TSAN_OPTIONS=suppressions=$(CURDIR)/tests/tsan.supp $(TSAN_BUILD)/tests/$$t; done

arm-check:
	scripts/arm-check.sh

fuzz:
	scripts/fuzz.sh $(FUZZ_SECONDS)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD) build-fuzz build-arm
