# inferd - the two entry points:
#   make serve   install dependencies, fetch the default models, build, and
#                run the daemon on 127.0.0.1:8080 with config/default.json
#   make test    the same set-up, then every test suite: the release build,
#                the AddressSanitizer+UBSan build, the ThreadSanitizer build
#                (its concurrency suite) and bounded fuzz runs
#   make container-smoke   build the Dockerfile with buildah (no Docker
#                engine) and check the image serves both models (root)
BUILD      ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
TSAN_BUILD ?= build-tsan
CONFIG     ?= config/default.json
LISTEN     ?= 127.0.0.1:8080
FUZZ_SECONDS ?= 20

.PHONY: serve test deps models build container-smoke

serve: deps models build
	$(BUILD)/inferd --config $(CONFIG) --listen $(LISTEN)

test: deps models
	@test -d $(BUILD) || meson setup $(BUILD) -Dwerror=true
	@test -d $(ASAN_BUILD) || meson setup $(ASAN_BUILD) -Dwerror=true -Dsanitize=address -Dbuildtype=debugoptimized
	@test -d $(FUZZ_BUILD) || CC=clang meson setup $(FUZZ_BUILD) -Dfuzz=true -Dbuildtype=debugoptimized
	@test -d $(TSAN_BUILD) || CC=clang meson setup $(TSAN_BUILD) -Dwerror=true -Dsanitize=thread -Dbuildtype=debugoptimized
	meson configure $(FUZZ_BUILD) -Dfuzz_seconds=$(FUZZ_SECONDS)
	ninja -C $(BUILD)
	ninja -C $(ASAN_BUILD)
	ninja -C $(FUZZ_BUILD)
	ninja -C $(TSAN_BUILD)
	scripts/run-tests $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD) $(TSAN_BUILD)

deps:
	scripts/install-deps

models:
	scripts/fetch-models

build:
	@test -d $(BUILD) || meson setup $(BUILD)
	ninja -C $(BUILD)

container-smoke: deps models
	scripts/container-smoke
