# The README's two commands. Each installs what is missing (Debian packages) first.
#   make run   sets up and runs the main job on the CPU twin
#   make test  sets up and runs every check CI runs (ci/test.sh)
#   make test-quick  the inner loop: the gcc build and its fast tests (ci/test.sh --quick)
.PHONY: run test test-quick deps build clean

deps:
	@ci/deps.sh

build: deps
	@cmake --preset twin >/dev/null
	@cmake --build build/twin -j$$(nproc)

# the programs only (bin/), not the tests: `make build` or `make test` builds those
run: deps
	@cmake --preset twin >/dev/null
	@cmake --build build/twin -j$$(nproc) --target programs
	@ci/run_main.sh

test: deps
	@ci/test.sh

test-quick: deps
	@ci/test.sh --quick

clean:
	rm -rf build
