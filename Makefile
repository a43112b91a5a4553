# The two commands of the README, and a few conveniences for development.
#   make run    install what is missing, build Release, run the main job on the default model
#   make test   install what is missing, build with -Werror, run every test, then again under
#               AddressSanitizer + UndefinedBehaviorSanitizer, the concurrent parts under
#               ThreadSanitizer, the NEON kernels cross-built for AArch64 and run under qemu,
#               then fuzz the GGUF reader for 60 s

JOBS ?= $(shell nproc)
BUILD ?= build
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
# Test binaries of code that runs on several threads; they run again under ThreadSanitizer.
TSAN_TESTS ?= thread_pool_test engine_test engine_stress_test
FUZZ_SECONDS ?= 60

.PHONY: run test deps build unit-test asan-test tsan-test arm-check fuzz clean

# `make run MODEL=path/to/model.gguf` runs the main job on a real model instead.
MODEL ?=
run: deps build
	$(BUILD)/cli/trellis demo $(if $(MODEL),-m $(MODEL),)

test: deps unit-test asan-test tsan-test arm-check fuzz

deps:
	@scripts/install-deps.sh

build:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DTRELLIS_WERROR=ON
	cmake --build $(BUILD) -j$(JOBS)

unit-test: build
	scripts/setup-node-client.sh $(BUILD)/node
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
	set -e; for t in $(TSAN_TESTS); do $(TSAN_BUILD)/tests/$$t; done

arm-check:
	scripts/arm-check.sh

fuzz:
	scripts/fuzz.sh $(FUZZ_SECONDS)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD) build-fuzz build-arm
