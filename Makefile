# Two commands, as root on a fresh Debian 12 machine:
#   make demo   install what is missing, build, run the demo on the virtual cluster
#   make test   install what is missing, build, run every test
# Other targets: build, sanitize (ASan/UBSan build + tests), bench-deps, clean.
# A subset of the tests: make test CTEST_ARGS="-L unit" (labels and more in docs/testing.md).

BUILD_DIR ?= build
SAN_DIR   ?= build-sanitize
JOBS      ?= $(shell nproc)
CMAKE_FLAGS ?=
CTEST_ARGS ?=

.PHONY: all bootstrap bootstrap-test build demo test sanitize bench-deps clean

# Runs ctest in build dir $(1), then one summary line counting passed, skipped and failed
# test cases (ctest counts a skip as passed in its own percentage line). The exit status is
# ctest's. A skip is never silent: docs/testing.md lists every skip condition and its reason.
define run_ctest
echo "ctest --test-dir $(1) --output-on-failure -j $(JOBS) $(CTEST_ARGS)"; \
{ ctest --test-dir $(1) --output-on-failure -j $(JOBS) $(CTEST_ARGS); echo $$? > $(1)/ctest.rc; } 2>&1 \
  | tee $(1)/ctest.log; \
rc=$$(cat $(1)/ctest.rc); \
awk -v rc=$$rc ' \
  /tests passed, [0-9]+ tests? failed out of [0-9]+/ { total = $$NF; failed = $$4 } \
  /^The following tests did not run:/ { list = 1; next } \
  /^The following tests FAILED:/ || /^$$/ { list = 0 } \
  list && /\(Skipped\)$$/ { skipped++ } \
  list && /\(Disabled\)$$/ { disabled++ } \
  END { \
    passed = total - failed - skipped; \
    line = sprintf("%d tests, %d passed, %d skipped (see docs/testing.md for why), %d failed", \
                   total, passed, skipped, failed); \
    if (disabled) line = line sprintf(", %d disabled", disabled); \
    if (total == 0) line = "no tests ran (ctest exit status " rc ")"; \
    print "\n" line; \
  }' $(1)/ctest.log; \
exit $$rc
endef

all: build

bootstrap:
	@scripts/bootstrap

bootstrap-test:
	@scripts/bootstrap --test

build: bootstrap
	@cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD_DIR) -j $(JOBS)

demo: build
	$(BUILD_DIR)/railyard demo

test: bootstrap-test build
	@$(call run_ctest,$(BUILD_DIR))

sanitize: bootstrap-test
	@cmake -S . -B $(SAN_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DRAILYARD_SANITIZE=ON -DRAILYARD_BUILD_BENCH=OFF >/dev/null
	@cmake --build $(SAN_DIR) -j $(JOBS)
	@$(call run_ctest,$(SAN_DIR))

bench-deps:
	@scripts/bootstrap --bench

clean:
	rm -rf $(BUILD_DIR) $(SAN_DIR)
