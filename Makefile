# Thin wrapper over CMake and CTest. `make demo` and `make test` are the README's two
# commands: each installs missing Debian packages (as root; otherwise prints the apt-get
# line), configures, builds incrementally, then runs.
BUILD ?= build
CMAKE_FLAGS ?=

.PHONY: all deps build demo neck test specs format lint clean

all: build

deps:
	@sh scripts/install-deps.sh

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja $(CMAKE_FLAGS)

build: deps $(BUILD)/build.ninja
	cmake --build $(BUILD)

demo: build
	./$(BUILD)/tocha examples/quickstart.lua

# A detector neck's top-down path as a model: forward, backward, gradcheck, graph replay.
neck: build
	./$(BUILD)/tocha examples/neck.lua

# The specs, then the same specs under ASan and UBSan, then bounded fuzzing.
test: build
	sh scripts/run-tests.sh $(BUILD)
	sh scripts/sanitize.sh $(BUILD)-asan $(CURDIR)/$(BUILD)/kernel-cache
	sh scripts/fuzz.sh $(BUILD)-fuzz

# The specs alone, for a quick loop while developing.
specs: build
	sh scripts/run-tests.sh $(BUILD)

format:
	clang-format -i host/include/*.h host/src/*.c host/src/*.h host/src/*/*.c host/src/*/*.h

lint:
	luacheck lua bindings spec examples bench

clean:
	rm -rf $(BUILD) $(BUILD)-asan $(BUILD)-fuzz
