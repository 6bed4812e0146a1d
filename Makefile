# Two commands, as root on a fresh Debian 12 machine:
#   make demo   install what is missing, build, run the demo on the virtual cluster
#   make test   install what is missing, build, run every test
# Other targets: build, sanitize (ASan/UBSan build + tests), bench-deps, clean.

BUILD_DIR ?= build
SAN_DIR   ?= build-sanitize
JOBS      ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all bootstrap build demo test sanitize bench-deps clean

all: build

bootstrap:
	@scripts/bootstrap

build: bootstrap
	@cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD_DIR) -j $(JOBS)

demo: build
	$(BUILD_DIR)/railyard demo

test: build
	ctest --test-dir $(BUILD_DIR) --output-on-failure -j $(JOBS)

sanitize: bootstrap
	@cmake -S . -B $(SAN_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DRAILYARD_SANITIZE=ON -DRAILYARD_BUILD_BENCH=OFF >/dev/null
	@cmake --build $(SAN_DIR) -j $(JOBS)
	ctest --test-dir $(SAN_DIR) --output-on-failure -j $(JOBS)

bench-deps:
	@scripts/bootstrap --bench

clean:
	rm -rf $(BUILD_DIR) $(SAN_DIR)
