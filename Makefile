# tetrasim: `make run` sets everything up and runs the main job; `make test` runs every test.
# Both install missing Debian packages first when run as root.

BUILD ?= build
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=
SCENARIO ?= scenarios/default.toml
PACKAGES := cmake g++ make pkgconf libboost-graph-dev libeigen3-dev libtomlplusplus-dev doctest-dev libyaml-dev \
            libbenchmark-dev libcli11-dev nlohmann-json3-dev zlib1g-dev chromium

.PHONY: all deps configure build run test bench clean asan fuzz fuzz-long error-bands

all: build

deps:
	@missing=""; for p in $(PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing:$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	  else \
	    echo "missing Debian packages:$$missing (run 'make deps' as root)"; exit 1; \
	  fi; \
	fi

configure: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS) >/dev/null

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

# Only the program it runs: the tests and benchmarks are built by `make test` and `make bench`.
run: configure
	@cmake --build $(BUILD) -j $(JOBS) --target tetrasim
	@./$(BUILD)/cli/tetrasim search $(SCENARIO) --top 10

test: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

bench: build
	@for b in $(BUILD)/bench/bench_*; do [ -x "$$b" ] && "$$b"; done

# The zero-shot error bands of predicted step times (docs/accuracy.md, "Error bands"), measured on every
# validation file by the built tetrasim and embedded by the next build; the test
# error_bands_up_to_date fails when the committed file differs from what this writes.
VALIDATION_CSVS := $(sort $(wildcard data/validation/*.csv))

error-bands: build
	@./$(BUILD)/cli/tetrasim bands $(VALIDATION_CSVS) --commit "$$(git describe --always --dirty 2>/dev/null || echo unknown)" -o data/error_bands.toml
	@cmake --build $(BUILD) -j $(JOBS)

clean:
	@rm -rf $(BUILD)

# Robustness: the whole test suite under AddressSanitizer + UndefinedBehaviorSanitizer, and
# libFuzzer over every input reader (tests/fuzz/README.md).
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 60

asan: deps
	@cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTETRASIM_SANITIZE=ON \
	  -DTETRASIM_BUILD_BENCHMARKS=OFF -DTETRASIM_WITH_CUDA=OFF $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(ASAN_BUILD) -j $(JOBS)
	@cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -j $(JOBS)

fuzz:
	@$(MAKE) --no-print-directory deps PACKAGES="$(PACKAGES) clang libclang-rt-14-dev"
	@cmake -S . -B $(FUZZ_BUILD) -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DTETRASIM_FUZZ=ON -DTETRASIM_BUILD_TESTS=OFF -DTETRASIM_BUILD_BENCHMARKS=OFF \
	  -DTETRASIM_WITH_CUDA=OFF $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(FUZZ_BUILD) -j $(JOBS) --target fuzz_targets
	@tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)

fuzz-long:
	@$(MAKE) --no-print-directory fuzz FUZZ_SECONDS=600
