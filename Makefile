# ckube top-level Makefile. `make run` and `make test` are the two set-up
# commands: each installs missing dependencies first.
BUILD      ?= build
TESTBUILD  ?= build/asan
TSANBUILD  ?= build/tsan
PREFIX     ?= /usr/local
JOBS       ?= $(shell nproc)
# Tests at once: one more than CPUs, as the e2e tests wait on servers and
# clients much of their time (the CPUs sat 30-77 % idle at one test per
# CPU); the multi-process etcd tests run alone (RUN_SERIAL, CMakeLists.txt).
TEST_JOBS  ?= $(shell echo $$(( $(JOBS) + 1 )))
ARGS       ?=

.PHONY: all deps build run test test-tsan install fuzz bench format clean

all: build

deps:
	@./scripts/install-deps.sh

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

run: build
	./$(BUILD)/ckube server $(ARGS)

# Every test, built with AddressSanitizer + UndefinedBehaviorSanitizer
# (every file also through clang's front end: `make fuzz` builds with
# clang, whose warnings gcc does not all give; scripts/clang-syntax.py);
# then the release build's own binaries (with mimalloc, as shipped) under
# the e2e tests labelled "shipped"; then the threaded runtime's tests
# (label "runtime"), the other unit tests that start threads ("threads"),
# the in-process servers' ("inproc") and the e2e tests again under
# ThreadSanitizer.
test: deps build
	@cmake -S . -B $(TESTBUILD) -DCMAKE_BUILD_TYPE=Debug \
	    -DCKUBE_SANITIZE=address,undefined >/dev/null
	@cmake --build $(TESTBUILD) -j $(JOBS)
	@python3 scripts/clang-syntax.py $(TESTBUILD)
	cd $(TESTBUILD) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	    ctest --output-on-failure -j $(TEST_JOBS) $(if $(T),-R $(T))
	cd $(BUILD) && ctest --output-on-failure -j $(TEST_JOBS) -L shipped $(if $(T),-R $(T))
	@$(MAKE) --no-print-directory test-tsan

test-tsan: deps
	@cmake -S . -B $(TSANBUILD) -DCMAKE_BUILD_TYPE=Debug -DCKUBE_SANITIZE=thread >/dev/null
	@cmake --build $(TSANBUILD) -j $(JOBS)
	cd $(TSANBUILD) && TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions=$(CURDIR)/tests/tsan.supp \
	    ctest --output-on-failure -j $(TEST_JOBS) -L 'runtime|threads|e2e|inproc' -LE timing $(if $(T),-R $(T))

# Installs ckube, ckube-controller-manager, libckube.so, the headers and ckube.pc.
install: build
	@cmake -S . -B $(BUILD) -DCMAKE_INSTALL_PREFIX=$(PREFIX) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)
	cmake --install $(BUILD)

# Benchmarks side by side with peers (etcd, @kubernetes/client-node):
# quick by default (under 5 minutes), FULL=1 for full scale. They report
# into build/bench/results.json and never fail on a figure. SCALE=1000000
# adds the scale phase (a million objects: start-up, RSS, list, resumed
# watch; about 20 minutes); COMPARE=DIR runs an older build's ckube from
# DIR next to this one in that phase.
bench: build
	@./scripts/install-deps.sh bench
	@/usr/bin/python3 bench/run.py --build $(BUILD) $(if $(FULL),--full) \
		$(if $(SCALE),--scale $(SCALE)) $(if $(COMPARE),--compare $(COMPARE))

# libFuzzer on every parser, FUZZ_SECONDS (30) each, FUZZ_JOBS (1) at a
# time, from the committed
# corpus (new inputs go to build/fuzz/work/). Every target runs even when
# one fails; findings (crashes, leaks, timeouts, units slower than 1 s) go
# to build/fuzz/findings/NAME/ and are listed at the end (scripts/fuzz.sh).
fuzz: deps
	@cmake -S . -B build/fuzz -DCMAKE_C_COMPILER=clang -DCKUBE_FUZZ=ON \
	    -DCKUBE_SANITIZE=address,undefined >/dev/null
	@cmake --build build/fuzz -j $(JOBS)
	@./scripts/fuzz.sh build/fuzz

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

clean:
	rm -rf build
