# Thin wrapper over CMake presets; CMake is the build system.
J ?= $(shell nproc)
.PHONY: all tq run check check-asan check-tsan check-all bench clean
all: tq
tq:
	cmake --preset release >/dev/null && cmake --build --preset release -j $(J)
run: tq
	./build/release/tq
check:
	cmake --preset dev >/dev/null && cmake --build --preset dev -j $(J) && ctest --preset dev -L fast -j $(J)
check-asan:
	cmake --preset asan >/dev/null && cmake --build --preset asan -j $(J) && ctest --preset asan -L fast -j $(J)
check-tsan:
	cmake --preset tsan >/dev/null && cmake --build --preset tsan -j $(J) && ctest --preset tsan -L tsan -j $(J)
check-all: check check-asan check-tsan
clean:
	rm -rf build
