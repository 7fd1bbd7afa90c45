# ckube top-level Makefile. `make run` and `make test` are the two set-up
# commands: each installs missing dependencies first.
BUILD      ?= build
TESTBUILD  ?= build/asan
JOBS       ?= $(shell nproc)
ARGS       ?=

.PHONY: all deps build run test unit e2e fuzz bench format clean

all: build

deps:
	@./scripts/install-deps.sh

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

run: build
	./$(BUILD)/ckube server $(ARGS)

# Every test, built with AddressSanitizer + UndefinedBehaviorSanitizer.
test: deps build
	@cmake -S . -B $(TESTBUILD) -DCMAKE_BUILD_TYPE=Debug \
	    -DCKUBE_SANITIZE=address,undefined >/dev/null
	@cmake --build $(TESTBUILD) -j $(JOBS)
	cd $(TESTBUILD) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	    ctest --output-on-failure -j $(JOBS) $(if $(T),-R $(T))

fuzz: deps
	@cmake -S . -B build/fuzz -DCMAKE_C_COMPILER=clang -DCKUBE_FUZZ=ON \
	    -DCKUBE_SANITIZE=address,undefined >/dev/null
	@cmake --build build/fuzz -j $(JOBS)
	@for f in build/fuzz/fuzz_*; do \
	    n=$${f##*/fuzz_}; w=build/fuzz/work/$$n; mkdir -p $$w; echo "== $$f"; \
	    $$f -max_total_time=$${FUZZ_SECONDS:-30} $$w tests/fuzz/corpus/$$n || exit 1; done

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

clean:
	rm -rf build
