# pdc - build, test, install. `make help` lists the targets.
#
# Every run first installs missing Debian packages (.ci/install-deps: apt-get, as root or through
# sudo; nothing when all are present), then builds in a sub-make. The order matters: the flags below
# ask llvm-config and pkg-config when the Makefile is parsed, so they must be parsed after the
# packages exist - on a fresh machine a single make would compile with empty flags.
# PDC_SKIP_DEPS=1 skips the check (and the sub-make); `make deps` runs it alone.

NO_DEPS_GOALS := clean help deps uninstall test-fresh perf-report
ifeq ($(PDC_SKIP_DEPS)$(PDC_DEPS_CHECKED),)
ifneq ($(filter-out $(NO_DEPS_GOALS),$(or $(MAKECMDGOALS),all)),)
DEPS_FIRST := 1
endif
endif

ifdef DEPS_FIRST
GOALS := $(or $(MAKECMDGOALS),all)
.PHONY: $(GOALS) deps-then-goals
$(GOALS): deps-then-goals ; @:
# Without -j, the libraries and the tool are built on every core first (the quick start's `make demo`
# builds in a minute instead of several); the goals themselves then run in order, output unmixed.
# (-j shows in MAKEFLAGS only when recipes are expanded, not when the Makefile is parsed.)
# (Not with clean or uninstall among the goals: they would undo it.)
PREBUILD := $(if $(filter clean uninstall,$(GOALS)),,$(filter all demo test,$(GOALS)))
deps-then-goals:
	@sh .ci/install-deps
	@prebuild="$(if $(filter -j%,$(MAKEFLAGS)),,$(PREBUILD))"; \
	goals="$(GOALS)"; \
	if [ -n "$$prebuild" ]; then \
	    $(MAKE) --no-print-directory PDC_DEPS_CHECKED=1 -j$$(nproc) all || exit 1; \
	    goals="$(filter-out all,$(GOALS))"; \
	fi; \
	[ -z "$$goals" ] || $(MAKE) --no-print-directory PDC_DEPS_CHECKED=1 $$goals
else

CC        ?= gcc
CXX       ?= g++
PREFIX    ?= /usr/local
SANITIZE  ?=
ifeq ($(SANITIZE),)
BUILD     ?= build
else
BUILD     ?= build-san
endif

VERSION   := $(shell sed -n 's/^\#define PDC_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\)/\2/p' include/pdc.h | paste -sd.)
SOMAJOR   := $(firstword $(subst ., ,$(VERSION)))

WARN      := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wvla
CFLAGS    ?= -O2 -g
PDC_CFLAGS = -std=c11 -D_POSIX_C_SOURCE=200809L $(WARN) -fPIC -fvisibility=hidden -fopenmp \
             -I. -Iinclude -DPDC_BUILDING
LDLIBS    := -lm -fopenmp
# ONNX import: the decoder is generated from Debian's onnx.proto (libonnx-dev) by protoc-c.
PROTOC_C   ?= protoc-c
ONNX_PROTO ?= /usr/include/onnx/onnx.proto
GEN        := $(BUILD)/gen
PDC_CFLAGS += -I$(GEN)
LDLIBS    += $(shell pkg-config --libs libprotobuf-c 2>/dev/null || echo -lprotobuf-c)
# The kernel cache's SHA-256 (lib/core/sha256.c): OpenSSL's libcrypto (libssl-dev).
LDLIBS    += $(shell pkg-config --libs libcrypto 2>/dev/null || echo -lcrypto)
# The cpu target: LLVM 19's ORC JIT and OpenBLAS. Their headers are seen by backends/ only.
LLVM_CONFIG ?= llvm-config-19
JIT_CFLAGS := -isystem $(shell $(LLVM_CONFIG) --includedir 2>/dev/null) $(shell pkg-config --cflags openblas 2>/dev/null)
# LLVM is linked by file, not with its -L folder: that folder also holds a libgomp.so that is LLVM's
# libomp (package libomp-19-dev, which make fuzz needs), and gcc's -fopenmp would then link it.
LDLIBS    += $(shell $(LLVM_CONFIG) --libfiles 2>/dev/null || echo -lLLVM-19) \
             $(shell pkg-config --libs openblas 2>/dev/null || echo -lopenblas)
ifneq ($(SANITIZE),)
PDC_CFLAGS += -fsanitize=$(SANITIZE) -fno-omit-frame-pointer -fno-sanitize-recover=all
LDLIBS     += -fsanitize=$(SANITIZE)
endif

# The library's sources, layer by layer (docs/architecture.md): every .c below these folders.
# lib/mpi is libpdc_mpi, a library of its own (below)
LIB_SRC   := $(sort $(filter-out lib/mpi/%,$(wildcard lib/*.c lib/*/*.c ir/*.c ir/*/*.c passes/*.c backends/*.c \
                              backends/*/*.c backends/*/*/*.c)))
LIB_OBJ   := $(LIB_SRC:%.c=$(BUILD)/obj/%.o) $(BUILD)/obj/gen/onnx.pb-c.o
TOOL_SRC  := $(wildcard examples/pdc/*.c)
TOOL_OBJ  := $(TOOL_SRC:%.c=$(BUILD)/obj/%.o)
# Check suites, one binary each, by concern: test/CONCERN/test_NAME.c -> $(BUILD)/test/CONCERN/test_NAME
TEST_SRC  := $(sort $(wildcard test/*/test_*.c))
TESTS     := $(TEST_SRC:test/%.c=$(BUILD)/test/%)
TEST_HDRS := $(wildcard test/common/*.h)
CHECK_FLAGS := $(shell pkg-config --cflags check 2>/dev/null)
CHECK_LIBS  := $(shell pkg-config --libs check 2>/dev/null)

SONAME    := libpdc.so.$(SOMAJOR)
SHLIB     := $(BUILD)/$(SONAME)
STLIB     := $(BUILD)/libpdc.a
TOOL      := $(BUILD)/pdc
DEMO_GEN  := $(BUILD)/make_demo_model
TRAIN_DEMO := $(BUILD)/train_digits
TRAIN_SEQ := $(BUILD)/train_seq
TRAIN_CLIPS := $(BUILD)/train_clips3d
TRAIN_BENCH := $(BUILD)/train_bench
TRAIN_RNN_BENCH := $(BUILD)/train_rnn_bench

.PHONY: all deps arm-report test test-unit test-cli test-headers test-exports test-example test-install test-valgrind demo install uninstall clean help
.PHONY: fuzz fuzz-build fuzz-targets test-fuzz-regressions test-tsan

all: $(SHLIB) $(STLIB) $(TOOL) $(TRAIN_SEQ) $(TRAIN_CLIPS)

help:
	@echo "make            build $(SONAME), libpdc.a and the pdc tool into $(BUILD)/"
	@echo "make test       build and run every test suite (unit, CLI, header checks)"
	@echo "make test SANITIZE=address,undefined   the same under ASan+UBSan (in build-san/)"
	@echo "make test-valgrind   the unit suites under valgrind memcheck"
	@echo "make test-gpu   the gpu suite on the real GPU (needs an NVIDIA driver and device)"
	@echo "make test-onnx-full  torchvision resnet18, mobilenet_v2, vgg16 (224x224) exported by python3-torch, run on ref"
	@echo "make test-train-torch one SGD step on torchvision resnet18 (dense and pruned) against PyTorch (part of make test where python3-torch is)"
	@echo "make test-onnx-video torchvision r3d_18, mc3_18, r2plus1d_18, dense and KGS-pruned, on cpu and ref (8-16 min)"
	@echo "make test-fresh the README's quick start on a new debootstrap'd Debian 12 root (root, network)"
	@echo "make test-tsan  the concurrency suite under ThreadSanitizer (in build-tsan/)"
	@echo "make fuzz FUZZ_SECONDS=60   build the libFuzzer targets (clang-19) and run each for that long"
	@echo "make test-fuzz-regressions   replay every fuzz corpus and regression input (part of make test)"
	@echo "make demo       train, prune and retrain the digits CNN (examples/train_digits.c), then inspect, run, convert it"
	@echo "make bench-python  per-call overhead of the Python bindings over the C call"
	@echo "make test-python   the Python bindings' suite (python/tests; /usr/bin/python3, numpy, pytest)"
	@echo "make bench-train   training step time (digits CNN, ResNet-18, VGG-16, MobileNetV2): pdc dense vs sparse vs PyTorch (/usr/bin/python3, python3-torch)"
	@echo "make bench-train-rnn   training step time of an LSTM 512 classifier: pdc dense and BCR-pruned vs PyTorch dense and masked"
	@echo "make arm-report  AArch64 emitter: library sizes, fmla count, qemu instructions per inference"
	@echo "make bench      inference: 3x3 layers vs oneDNN/OpenBLAS, ResNet-18/VGG-16 vs ONNX Runtime, compile time, fc/LSTM batches vs OpenBLAS, BCR LSTM/GRU vs ONNX Runtime"
	@echo "make bench-predict  the latency model (pdc predict) against measured times, after pdc calibrate"
	@echo "make search-digits  successive halving over 16 retraining configurations of the digits CNN (examples/search_digits.c)"
	@echo "make bench-tune  kernel auto-tuning vs the heuristics: 3x3 layers, ResNet-18, VGG-16 (1, 2 threads; host ISA and AVX2)"
	@echo "make perf-report docs/performance.md from the recorded test/bench/*.tsv"
	@echo "make bench-gpu  the gpu target vs cuDNN on the 3x3 layers, whole models gpu vs cpu (needs a GPU and cuDNN)"
	@echo "make install PREFIX=/usr/local   header, libraries, pdc tool, pdc.pc"
	@echo "make deps       install missing Debian packages (apt-get)"

deps:
	@sh .ci/install-deps

$(BUILD)/obj/backends/llvm/%.o $(BUILD)/obj/backends/cpu/%.o $(BUILD)/obj/backends/arm/%.o $(BUILD)/obj/backends/gpu/%.o $(BUILD)/test/cpu/%: PDC_CFLAGS += $(JIT_CFLAGS)
$(BUILD)/obj/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(PDC_CFLAGS) $(CFLAGS) -MMD -MP -c $< -o $@

# Generated code is never committed. It is not ours, so it is built without -Werror; everything that
# includes its header waits for it.
$(GEN)/onnx.pb-c.c: $(ONNX_PROTO)
	@mkdir -p $(@D)
	$(PROTOC_C) --c_out=$(GEN) --proto_path=$(dir $(ONNX_PROTO)) $(ONNX_PROTO)
$(GEN)/onnx.pb-c.h: $(GEN)/onnx.pb-c.c ;
$(BUILD)/obj/gen/onnx.pb-c.o: $(GEN)/onnx.pb-c.c
	@mkdir -p $(@D)
	$(CC) $(filter-out -Werror,$(PDC_CFLAGS)) $(CFLAGS) -MMD -MP -c $< -o $@
$(filter $(BUILD)/obj/lib/onnx/%.o,$(LIB_OBJ)) $(BUILD)/obj/lib/api_model.o $(filter $(BUILD)/test/onnx/%,$(TESTS)): $(GEN)/onnx.pb-c.h

# The JIT's kernel cache keys carry a hash of the kernel generators' sources, so a changed generator
# never loads an object cached by an older build (generator tags are bumped by hand and can be missed).
GENERATOR_SRC := $(sort $(wildcard backends/llvm/*.[ch] backends/cpu/*.[ch] backends/cpu/*/*.[ch]))
$(GEN)/generator_id.h: $(GENERATOR_SRC)
	@mkdir -p $(@D)
	@printf '#define PDC_GENERATOR_ID "%s"\n' "$$(cat $(GENERATOR_SRC) | sha256sum | cut -c1-16)" > $@
$(BUILD)/obj/backends/llvm/jit.o $(BUILD)/obj/lib/tune/tune_db.o: $(GEN)/generator_id.h

$(SHLIB): $(LIB_OBJ) lib/libpdc.map
	$(CC) -shared -Wl,-soname,$(SONAME) -Wl,--version-script=lib/libpdc.map -Wl,--no-undefined \
	    -o $@ $(LIB_OBJ) $(LDLIBS)
	ln -sf $(SONAME) $(BUILD)/libpdc.so

$(STLIB): $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $(LIB_OBJ)

# The tool uses only the public header and the shared library.
$(TOOL): $(TOOL_OBJ) $(SHLIB)
	$(CC) -o $@ $(TOOL_OBJ) -L$(BUILD) -l:$(SONAME) -Wl,-rpath,'$$ORIGIN' $(LDLIBS)

# The training example and benchmark use only the public header and the shared library.
$(TRAIN_DEMO): $(BUILD)/obj/examples/train_digits.o $(SHLIB)
	$(CC) -o $@ $< -L$(BUILD) -l:$(SONAME) -Wl,-rpath,'$$ORIGIN' $(LDLIBS)
$(TRAIN_SEQ): $(BUILD)/obj/examples/train_seq.o $(SHLIB)
	$(CC) -o $@ $< -L$(BUILD) -l:$(SONAME) -Wl,-rpath,'$$ORIGIN' $(LDLIBS)
$(TRAIN_CLIPS): $(BUILD)/obj/examples/train_clips3d.o $(SHLIB)
	$(CC) -o $@ $< -L$(BUILD) -l:$(SONAME) -Wl,-rpath,'$$ORIGIN' $(LDLIBS)
$(BUILD)/obj/examples/train_digits.o $(BUILD)/obj/examples/train_seq.o $(BUILD)/obj/examples/train_clips3d.o: \
    examples/example_common.h
$(TRAIN_RNN_BENCH): $(BUILD)/obj/test/bench/train/train_rnn_bench.o $(SHLIB)
	$(CC) -o $@ $< -L$(BUILD) -l:$(SONAME) -Wl,-rpath,'$$ORIGIN' $(LDLIBS)
$(TRAIN_BENCH): $(BUILD)/obj/test/bench/train/train_bench.o $(BUILD)/obj/test/bench/train/bench_nets.o $(SHLIB)
	$(CC) -o $@ $(filter %.o,$^) -L$(BUILD) -l:$(SONAME) -Wl,-rpath,'$$ORIGIN' $(LDLIBS)
$(addprefix $(BUILD)/obj/test/bench/train/,train_bench.o train_rnn_bench.o bench_nets.o): test/bench/train/bench_nets.h

# The hyperparameter search example (examples/search_digits.c): public header and shared library only.
SEARCH_DEMO := $(BUILD)/search_digits
$(SEARCH_DEMO): $(BUILD)/obj/examples/search_digits.o $(SHLIB)
	$(CC) -o $@ $< -L$(BUILD) -l:$(SONAME) -Wl,-rpath,'$$ORIGIN' $(LDLIBS)
.PHONY: search-digits
search-digits: $(SEARCH_DEMO)
	$(SEARCH_DEMO)

$(DEMO_GEN): $(BUILD)/obj/examples/make_demo_model.o $(SHLIB)
	$(CC) -o $@ $< -L$(BUILD) -l:$(SONAME) -Wl,-rpath,'$$ORIGIN' $(LDLIBS)

# test_api uses only the public ABI (linked against the .so); other suites see internals (static lib).
$(BUILD)/test/api/test_api: test/api/test_api.c $(TEST_HDRS) $(SHLIB)
	@mkdir -p $(@D)
	$(CC) $(PDC_CFLAGS) $(CFLAGS) $(CHECK_FLAGS) -o $@ $< -L$(BUILD) -l:$(SONAME) -Wl,-rpath,'$$ORIGIN/../..' \
	    $(CHECK_LIBS) $(LDLIBS)
$(BUILD)/test/%: test/%.c $(TEST_HDRS) $(STLIB)
	@mkdir -p $(@D)
	$(CC) $(PDC_CFLAGS) $(CFLAGS) $(CHECK_FLAGS) -o $@ $< $(STLIB) $(CHECK_LIBS) $(LDLIBS)

test: test-layering test-headers test-exports test-prefetch test-unit test-gpu-abi test-fuzz-regressions test-example test-cli test-install \
      test-readme test-python test-clips3d test-mpi test-train-torch

# The 3-D CNN example (examples/train_clips3d.c): KGS-pruned and retrained, within 0.01 of its dense accuracy.
.PHONY: test-clips3d
test-clips3d: $(TRAIN_CLIPS)
	@out=$$($(TRAIN_CLIPS) --quiet --threads 1) || { echo "$$out"; exit 1; }; echo "$$out" | tail -1

# One SGD step of the trainer on torchvision's ResNet-18 (dense, and pattern-pruned with masked gradients)
# against PyTorch's: loss and every weight's gradient (test/train/torch_resnet18_check.py). Needs Debian's
# python3-torch and python3-torchvision (not installed by CI: skipped there with a message).
.PHONY: test-train-torch
test-train-torch: $(SHLIB)
	@if [ -n "$(SANITIZE)" ]; then echo "train-torch: SKIPPED (SANITIZE=$(SANITIZE): an instrumented library cannot load into $(PYTHON))"; \
	elif ! $(PYTHON) -c 'import numpy, torch, torchvision' 2>/dev/null; then \
	  echo "train-torch: SKIPPED ($(PYTHON) cannot import numpy, torch and torchvision: apt-get install python3-torch python3-torchvision)"; \
	else PDC_LIBRARY=$(CURDIR)/$(SHLIB) PYTHONPATH=$(CURDIR)/python PYTHONDONTWRITEBYTECODE=1 \
	  $(PYTHON) -W ignore test/train/torch_resnet18_check.py; fi

# The Python bindings (python/pdc, pure Python over the C ABI): Debian's /usr/bin/python3 with python3-numpy
# and python3-pytest (installed by .ci/install-deps); the pdc.torch tests skip themselves without python3-torch.
# `make install` puts the package into Debian's layout, PREFIX/lib/python3/dist-packages/pdc.
PYTHON  ?= /usr/bin/python3
PY_SRC  := $(wildcard python/pdc/*.py)
PYDIR    = $(DESTDIR)$(PREFIX)/lib/python3/dist-packages/pdc
.PHONY: test-python bench-python
test-python: $(SHLIB)
	@if [ -n "$(SANITIZE)" ]; then echo "python: SKIPPED (SANITIZE=$(SANITIZE): an instrumented library cannot load into $(PYTHON))"; \
	elif [ ! -x $(PYTHON) ]; then echo "python: SKIPPED ($(PYTHON) is absent: the Python bindings are not tested)"; \
	elif ! $(PYTHON) -c 'import numpy, pytest' 2>/dev/null; then \
	  echo "python: SKIPPED ($(PYTHON) cannot import numpy and pytest: apt-get install python3-numpy python3-pytest)"; \
	else PDC_LIBRARY=$(CURDIR)/$(SHLIB) PDC_TEST_DATA=$(CURDIR)/test/data PYTHONDONTWRITEBYTECODE=1 \
	  $(PYTHON) -m pytest -q -rs -p no:cacheprovider python/tests; fi

# Per-call overhead of the Python bindings over the C call, on small models (not a timed test;
# test/bench/bench_python.py). Also run at the end of make bench.
$(BUILD)/bench_call: $(BUILD)/obj/test/bench/bench_call.o $(SHLIB)
	$(CC) -o $@ $< -L$(BUILD) -l:$(SONAME) -Wl,-rpath,'$$ORIGIN' $(LDLIBS)
bench-python: $(SHLIB) $(BUILD)/bench_call
	@if [ -x $(PYTHON) ] && $(PYTHON) -c 'import numpy' 2>/dev/null; then \
	  PDC_LIBRARY=$(CURDIR)/$(SHLIB) PYTHONDONTWRITEBYTECODE=1 $(PYTHON) test/bench/bench_python.py --c-bench $(BUILD)/bench_call; \
	else echo "bench-python: skipped ($(PYTHON) with numpy is absent)"; fi

# Each suite's line carries its place in the run ([3/16]): the longest take a minute or more.
test-unit: $(TESTS)
	@set -e; n=0; for t in $(TESTS); do n=$$((n + 1)); echo "== [$$n/$(words $(TESTS))] $$t"; \
	  PDC_TEST_DATA=test/data $$t; done

# The gpu suite on the real device (make test-unit runs it on the emulated one): fails without a GPU.
.PHONY: test-gpu
test-gpu: $(BUILD)/test/gpu/test_gpu
	PDC_TEST_GPU=1 PDC_TEST_DATA=test/data $(BUILD)/test/gpu/test_gpu

# backends/gpu/cuda_api.h against the toolkit's cuda.h: types, prototypes and enum values at compile
# time, the dlsym'd symbol names at run time (test/gpu/cuda_abi.c). Skipped where cuda.h is absent.
CUDA_HOME ?= /usr/local/cuda
.PHONY: test-gpu-abi
test-gpu-abi: $(STLIB)
	@mkdir -p $(BUILD)/test
	@if [ -f $(CUDA_HOME)/include/cuda.h ]; then \
	  $(CC) $(PDC_CFLAGS) $(CFLAGS) -isystem $(CUDA_HOME)/include -o $(BUILD)/test/gpu_cuda_abi test/gpu/cuda_abi.c \
	    $(STLIB) $(LDLIBS) && $(BUILD)/test/gpu_cuda_abi; \
	else echo "cuda abi: skipped ($(CUDA_HOME)/include/cuda.h absent)"; fi

test-cli: $(TOOL) $(DEMO_GEN) $(TRAIN_DEMO)
	@sh test/cli.sh $(BUILD)

# Includes point down the layers only (docs/architecture.md; the rules are in test/layering.sh).
.PHONY: test-layering
test-layering:
	@sh test/layering.sh

# Every command of the README runs (test/readme.sh); its quick start's setup lines run in test-fresh.
.PHONY: test-readme test-fresh
test-readme: all $(TRAIN_DEMO)
	@sh test/readme.sh $(BUILD)

# The README's quick start, exactly as written, on a brand-new Debian 12 root (debootstrap, as root;
# downloads ~150 packages). Not part of make test: run before release-like changes (docs/building.md).
test-fresh:
	@sh test/fresh/run.sh

# Emitted AArch64 libraries: code/const bytes, fmla count, instructions per inference under qemu.
arm-report: $(TOOL)
	@sh test/arm/report.sh $(BUILD)

# Each public header compiles alone as C99 and as C++ with pedantic warnings.
test-headers:
	@mkdir -p $(BUILD)
	$(CC) -std=c99 -pedantic -Wall -Wextra -Werror -Iinclude -x c -fsyntax-only include/pdc.h
	$(CXX) -std=c++11 -pedantic -Wall -Wextra -Werror -Iinclude -x c++ -fsyntax-only include/pdc.h
	@echo "headers: 2 passed, 0 failed"
	@if [ -n "$(HAVE_MPI)" ]; then $(MPICC) -std=c99 -pedantic -Wall -Wextra -Werror -Iinclude -x c -fsyntax-only include/pdc_mpi.h && \
	  $(MPICXX) -DOMPI_SKIP_MPICXX -std=c++11 -pedantic -Wall -Wextra -Werror -Iinclude -x c++ -fsyntax-only \
	  include/pdc_mpi.h && echo "headers: pdc_mpi.h 2 passed, 0 failed"; else $(MPI_NO); fi

# The README's C example, built as a client would build it (public header, shared library).
$(BUILD)/api_example: examples/api_example.c include/pdc.h $(SHLIB)
	$(CC) -std=c11 -Wall -Wextra -Werror $(CFLAGS) -Iinclude -o $@ $< -L$(BUILD) -l:$(SONAME) -Wl,-rpath,'$$ORIGIN' $(LDLIBS)

test-example: $(BUILD)/api_example
	@$(BUILD)/api_example > $(BUILD)/api_example.out && cmp -s $(BUILD)/api_example.out test/data/api_example.expected \
	    && echo "example: 1 passed, 0 failed" || { echo "example: output differs:"; cat $(BUILD)/api_example.out; exit 1; }

# make install into a staging prefix, then build the C example the way a user would: pkg-config.
test-install: all
	@rm -rf $(BUILD)/stage
	@$(MAKE) --no-print-directory -s install PREFIX=$(CURDIR)/$(BUILD)/stage PDC_SKIP_DEPS=1 >/dev/null
	@PKG_CONFIG_PATH=$(CURDIR)/$(BUILD)/stage/lib/pkgconfig; export PKG_CONFIG_PATH; \
	  $(CC) -std=c11 examples/api_example.c $$(pkg-config --cflags --libs pdc) $(LDLIBS) \
	    -Wl,-rpath,$(CURDIR)/$(BUILD)/stage/lib -o $(BUILD)/stage/api_example && \
	  $(BUILD)/stage/api_example | cmp -s - test/data/api_example.expected && \
	  $(BUILD)/stage/bin/pdc --version >/dev/null && \
	  { [ -n "$(SANITIZE)" ] || [ ! -x $(PYTHON) ] || ! $(PYTHON) -c 'import numpy' 2>/dev/null || \
	    env -u PDC_LIBRARY PYTHONDONTWRITEBYTECODE=1 PYTHONPATH=$(CURDIR)/$(BUILD)/stage/lib/python3/dist-packages \
	    $(PYTHON) -c 'import pdc, sys; sys.exit(pdc.library_path != "$(CURDIR)/$(BUILD)/stage/lib/$(SONAME)" or \
	      pdc.load("test/data/onnx/resnet_small.onnx").compile("ref")(__import__("numpy").zeros((2,3,32,32),"f")).shape != (2,10))'; } && \
	  echo "install: 1 passed, 0 failed" || { echo "install: 0 passed, 1 failed"; exit 1; }

test-exports: $(SHLIB)
	@sh test/exports.sh $(SHLIB)

# The packer's software prefetches (input and packed planes, before the loop and in it: 8) are in
# its object code: gcc 12 once dropped them all from a helper it deemed free of effects, unnoticed.
.PHONY: test-prefetch
test-prefetch: $(BUILD)/obj/backends/cpu/conv/conv_pack.o
	@n=$$(objdump -d $< | grep -c prefetch); echo "conv_pack.o: $$n prefetch instructions"; \
	  [ "$$n" -ge 8 ] || { echo "conv_pack.o: expected 8 or more (conv_pack.c, prefetch_floats)"; exit 1; }

# Full-size torchvision models are too big to commit: Debian's python3-torch exports them (seeded
# random weights) into $(BUILD)/onnx-full, then onnx_check runs them on ref against PyTorch's outputs.
ONNX_FULL := $(BUILD)/onnx-full
$(BUILD)/onnx_check: test/onnx/onnx_check.c include/pdc.h $(STLIB)
	$(CC) $(PDC_CFLAGS) $(CFLAGS) -o $@ $< $(STLIB) $(LDLIBS)

.PHONY: test-onnx-full
test-onnx-full: $(BUILD)/onnx_check
	@if ! /usr/bin/python3 -c 'import torch, torchvision, onnx' 2>/dev/null; then \
	    echo "test-onnx-full: skipped (/usr/bin/python3 cannot import torch, torchvision and onnx)"; \
	else \
	    { [ -f $(ONNX_FULL)/vgg16.out.bin ] || /usr/bin/python3 test/data/make_onnx_models.py --full $(ONNX_FULL); } && \
	    $(BUILD)/onnx_check $(ONNX_FULL) resnet18 mobilenet_v2 vgg16; \
	fi

# torchvision's video models r3d_18, mc3_18, r2plus1d_18 at 1x3x8x112x112, dense and KGS-pruned in PyTorch
# (test/onnx/make_video_models.py into $(BUILD)/onnx-video): the kernel groups recognised at import
# (video_kgs.sh), then cpu and ref against PyTorch's outputs. 8-16 minutes here (ref runs the
# 3-D convs directly), so it is not part of `make test`.
ONNX_VIDEO := $(BUILD)/onnx-video
.PHONY: test-onnx-video
test-onnx-video: $(BUILD)/onnx_check $(TOOL)
	@if ! /usr/bin/python3 -c 'import torch, torchvision' 2>/dev/null; then \
	    echo "test-onnx-video: skipped (/usr/bin/python3 cannot import torch and torchvision)"; \
	else \
	    { [ -f $(ONNX_VIDEO)/r2plus1d_18-kgs.out.bin ] || /usr/bin/python3 test/onnx/make_video_models.py $(ONNX_VIDEO); } && \
	    sh test/onnx/video_kgs.sh $(TOOL) $(ONNX_VIDEO) && \
	    $(BUILD)/onnx_check --target cpu --target ref $(ONNX_VIDEO) r3d_18 r3d_18-kgs mc3_18 mc3_18-kgs \
	        r2plus1d_18 r2plus1d_18-kgs; \
	fi

test-valgrind: $(TESTS)
	@set -e; n=0; for t in $(TESTS); do n=$$((n + 1)); echo "== [$$n/$(words $(TESTS))] valgrind $$t"; \
	  CK_FORK=no CK_DEFAULT_TIMEOUT=600 PDC_TEST_DATA=test/data PDC_TEST_QUICK=1 valgrind -q --error-exitcode=99 \
	    --leak-check=full --errors-for-leak-kinds=definite --show-leak-kinds=definite $$t; done

# ------------------------------------------------------------------ fuzzing, sanitizers (test/fuzz/README.md)
# Each test/fuzz/fuzz_NAME.c is a libFuzzer target. `make fuzz` builds them with clang-19 and
# fuzzer+ASan+UBSan in $(FUZZ_BUILD)/ and runs each for FUZZ_SECONDS; the same sources linked with
# test/fuzz/replay.c replay every seed and every crash ever found with the normal compiler.
FUZZ_CC      ?= clang-19
# clang's vectorizer remarks and gcc-only hints (attribute optimize) are not errors here; the
# function sanitizer is off because it reads a signature before every indirect call's target, and
# JIT-compiled kernels have none (a false SEGV in backends/cpu).
FUZZ_CLANG_FLAGS := -Wno-pass-failed -Wno-unknown-attributes -fno-sanitize=function
FUZZ_SECONDS ?= 60
FUZZ_BUILD   ?= build-fuzz
FUZZ_NAMES   := $(patsubst test/fuzz/fuzz_%.c,%,$(wildcard test/fuzz/fuzz_*.c))
FUZZ_CLI_OBJ  = $(BUILD)/obj/examples/pdc/args.o $(BUILD)/obj/examples/pdc/rawio.o
REPLAY_BINS  := $(FUZZ_NAMES:%=$(BUILD)/fuzz-replay/fuzz_%)

$(BUILD)/fuzz-replay/fuzz_%: test/fuzz/fuzz_%.c test/fuzz/replay.c test/fuzz/fuzz.h test/fuzz/model_gen.h $(STLIB) $(FUZZ_CLI_OBJ)
	@mkdir -p $(@D)
	$(CC) $(PDC_CFLAGS) $(CFLAGS) -o $@ $< test/fuzz/replay.c $(FUZZ_CLI_OBJ) $(STLIB) $(LDLIBS)

test-fuzz-regressions: $(REPLAY_BINS)
	@set -e; for n in $(FUZZ_NAMES); do \
	  $(BUILD)/fuzz-replay/fuzz_$$n $$n $$(ls -d test/fuzz/corpus/$$n test/fuzz/regressions/$$n 2>/dev/null) \
	    2>$(BUILD)/fuzz-replay/$$n.log || { tail -n 40 $(BUILD)/fuzz-replay/$$n.log; \
	    echo "fuzz-replay $$n: FAILED (log: $(BUILD)/fuzz-replay/$$n.log)"; exit 1; }; done

fuzz-build:
	@[ -n "$(PDC_SKIP_DEPS)" ] || sh .ci/install-deps clang-19 libclang-rt-19-dev libomp-19-dev
	@$(MAKE) --no-print-directory CC=$(FUZZ_CC) BUILD=$(FUZZ_BUILD) SANITIZE=fuzzer-no-link,address,undefined \
	    CFLAGS="-O1 -g $(FUZZ_CLANG_FLAGS)" PDC_SKIP_DEPS=1 fuzz-targets

fuzz-targets: $(FUZZ_NAMES:%=$(BUILD)/fuzz_%)

$(BUILD)/fuzz_%: test/fuzz/fuzz_%.c test/fuzz/fuzz.h test/fuzz/model_gen.h $(STLIB) $(FUZZ_CLI_OBJ)
	$(CC) $(PDC_CFLAGS) $(CFLAGS) -fsanitize=fuzzer -o $@ $< $(FUZZ_CLI_OBJ) $(STLIB) $(LDLIBS)

fuzz: fuzz-build
	@sh test/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ_NAMES)

# The concurrency suite under ThreadSanitizer, in its own build folder: built with clang-19 and LLVM's
# OpenMP runtime, whose archer tool (OMP_TOOL_LIBRARIES) tells TSan about the runtime's own
# synchronisation, so the cpu backend's parallel regions and the DAG scheduler's lanes are checked too
# (gcc's libgomp is not instrumented: TSan then reports every parallel region). Packages as make fuzz.
TSAN_BUILD ?= build-tsan
ARCHER     ?= $(shell $(LLVM_CONFIG) --libdir 2>/dev/null)/libarcher.so
test-tsan:
	@[ -n "$(PDC_SKIP_DEPS)" ] || sh .ci/install-deps clang-19 libclang-rt-19-dev libomp-19-dev
	@$(MAKE) --no-print-directory CC=$(FUZZ_CC) BUILD=$(TSAN_BUILD) SANITIZE=thread CFLAGS="-O1 -g $(FUZZ_CLANG_FLAGS)" \
	    PDC_SKIP_DEPS=1 $(TSAN_BUILD)/test/reliability/test_threads
	@CK_FORK=no OMP_TOOL_LIBRARIES=$(ARCHER) TSAN_OPTIONS="halt_on_error=1 exitcode=66 ignore_noninstrumented_modules=1" \
	    PDC_TEST_DATA=test/data $(TSAN_BUILD)/test/reliability/test_threads

demo: all $(TRAIN_DEMO)
	@sh examples/demo.sh $(BUILD)

.PHONY: bench-train-rnn
bench-train-rnn: all $(TRAIN_RNN_BENCH)
	/usr/bin/python3 test/bench/train/train_rnn_torch.py --pdc $(TRAIN_RNN_BENCH)

.PHONY: bench-train
bench-train: all $(TRAIN_BENCH)
	@for m in digits resnet18 vgg16 mobilenetv2; do /usr/bin/python3 test/bench/train/train_torch.py --pdc $(TRAIN_BENCH) \
	  --model $$m || exit 1; echo; done

# Inference benchmarks, not part of make test (docs/performance.md): 3x3 layers against oneDNN and
# OpenBLAS (test/bench/results.tsv: activations in cache as in a network; results_cold.tsv: as
# the other engines' runs left them), pdc's 2-thread speed-up on those layers with the 1-thread runs
# pinned to each CPU in turn (test/bench/results_scaling.tsv), whole networks against ONNX Runtime and compile time
# (test/bench/results_e2e.tsv), fc and LSTM at batch 1, 8 and 32 against OpenBLAS
# (test/bench/results_batch.tsv). OpenBLAS's DYNAMIC_ARCH picks its Haswell kernels on AVX-512 AMD
# CPUs; the benchmark command alone asks for SkylakeX there, OpenBLAS's best on such a CPU.
BENCH_CONV := $(BUILD)/bench_conv
BENCH_E2E  := $(BUILD)/bench_e2e
BENCH_BATCH := $(BUILD)/bench_batch
BENCH_RNN := $(BUILD)/bench_rnn
BENCH_BCR := $(BUILD)/bench_bcr
BENCH_SCALING := $(BUILD)/bench_scaling
BENCH_GROUP := $(BUILD)/bench_group
BENCH_PREDICT := $(BUILD)/bench_predict
BENCH_CONV3D := $(BUILD)/bench_conv3d
BENCH_R3D18 := $(BUILD)/bench_r3d18
$(BUILD)/obj/test/bench/bench_conv.o: PDC_CFLAGS += $(JIT_CFLAGS)
$(BUILD)/obj/test/bench/bench_conv.o: | deps-bench
$(BENCH_CONV): $(BUILD)/obj/test/bench/bench_conv.o $(BUILD)/obj/test/bench/conv_case.o $(BUILD)/obj/test/bench/layers.o \
               $(BUILD)/obj/test/bench/host.o $(BUILD)/obj/test/bench/dnnl_conv.o $(SHLIB)
	$(CC) -o $@ $(filter %.o,$^) -L$(BUILD) -l:$(SONAME) -Wl,-rpath,'$$ORIGIN' -ldnnl $(LDLIBS)
$(BENCH_SCALING): $(BUILD)/obj/test/bench/bench_scaling.o $(BUILD)/obj/test/bench/conv_case.o \
                  $(BUILD)/obj/test/bench/layers.o $(BUILD)/obj/test/bench/host.o $(SHLIB)
	$(CC) -o $@ $(filter %.o,$^) -L$(BUILD) -l:$(SONAME) -Wl,-rpath,'$$ORIGIN' $(LDLIBS)
$(BENCH_E2E): $(BUILD)/obj/test/bench/bench_e2e.o $(BUILD)/obj/test/bench/models.o $(BUILD)/obj/test/bench/host.o \
             $(BUILD)/obj/test/bench/layers.o $(SHLIB)
	$(CC) -o $@ $(filter %.o,$^) -L$(BUILD) -l:$(SONAME) -Wl,-rpath,'$$ORIGIN' $(LDLIBS)
$(BENCH_GROUP): $(BUILD)/obj/test/bench/bench_group.o $(BUILD)/obj/test/bench/models.o \
               $(BUILD)/obj/test/bench/layers.o $(SHLIB)
	$(CC) -o $@ $(filter %.o,$^) -L$(BUILD) -l:$(SONAME) -Wl,-rpath,'$$ORIGIN' $(LDLIBS)
$(BENCH_PREDICT): $(BUILD)/obj/test/bench/bench_predict.o $(BUILD)/obj/test/bench/models.o \
                  $(BUILD)/obj/test/bench/layers.o $(SHLIB)
	$(CC) -o $@ $(filter %.o,$^) -L$(BUILD) -l:$(SONAME) -Wl,-rpath,'$$ORIGIN' $(LDLIBS)
$(BUILD)/obj/test/bench/bench_conv3d.o $(BUILD)/obj/test/bench/dnnl_conv.o: | deps-bench
$(BUILD)/obj/test/bench/bench_conv.o $(BUILD)/obj/test/bench/bench_conv3d.o $(BUILD)/obj/test/bench/dnnl_conv.o: \
    test/bench/dnnl_conv.h
$(BENCH_CONV3D): $(BUILD)/obj/test/bench/bench_conv3d.o $(BUILD)/obj/test/bench/layers.o $(BUILD)/obj/test/bench/dnnl_conv.o \
                 $(SHLIB)
	$(CC) -o $@ $(filter %.o,$^) -L$(BUILD) -l:$(SONAME) -Wl,-rpath,'$$ORIGIN' -ldnnl $(LDLIBS)
$(BENCH_R3D18): $(BUILD)/obj/test/bench/bench_r3d18.o $(BUILD)/obj/test/bench/layers.o $(SHLIB)
	$(CC) -o $@ $(filter %.o,$^) -L$(BUILD) -l:$(SONAME) -Wl,-rpath,'$$ORIGIN' $(LDLIBS)
$(BENCH_BATCH): $(BUILD)/obj/test/bench/bench_batch.o $(BUILD)/obj/test/bench/layers.o $(SHLIB)
	$(CC) -o $@ $(filter %.o,$^) -L$(BUILD) -l:$(SONAME) -Wl,-rpath,'$$ORIGIN' $(LDLIBS)
$(BENCH_RNN): $(BUILD)/obj/test/bench/bench_rnn.o $(BUILD)/obj/test/bench/layers.o $(SHLIB)
	$(CC) -o $@ $(filter %.o,$^) -L$(BUILD) -l:$(SONAME) -Wl,-rpath,'$$ORIGIN' $(LDLIBS)
$(BENCH_BCR): $(BUILD)/obj/test/bench/bench_bcr.o $(BUILD)/obj/test/bench/layers.o $(SHLIB)
	$(CC) -o $@ $(filter %.o,$^) -L$(BUILD) -l:$(SONAME) -Wl,-rpath,'$$ORIGIN' $(LDLIBS)

# BCR products beyond the RNN cells (fc, 1x1 conv) and at 2 threads: dense vs 4x BCR, 1 and 2 threads
# (test/bench/results_bcr.tsv; docs/backends.md quotes it).
.PHONY: bench-bcr
bench-bcr: all $(BENCH_BCR)
	$(BENCH_BCR) --out test/bench/results_bcr.tsv

.PHONY: bench deps-bench
deps-bench:
	@[ -n "$(PDC_SKIP_DEPS)" ] || sh .ci/install-deps libdnnl-dev
	@command -v node >/dev/null || [ -n "$(PDC_SKIP_DEPS)" ] || sh .ci/install-deps nodejs npm
	@[ -d test/bench/ort/node_modules/onnxruntime-node ] || npm install --prefix test/bench/ort --no-audit --no-fund \
	    --ignore-scripts onnxruntime-node@1.30.0 || echo "bench: no onnxruntime-node: the ONNX Runtime comparison is skipped"

bench: deps-bench all $(BENCH_CONV) $(BENCH_SCALING) $(BENCH_E2E) $(BENCH_BATCH) $(BENCH_GROUP) $(BENCH_RNN) \
       $(BENCH_CONV3D) $(BENCH_R3D18)
	OPENBLAS_CORETYPE=$$(grep -qw avx512f /proc/cpuinfo && echo SkylakeX || echo Haswell) $(BENCH_CONV) \
	    --out test/bench/results.tsv
	OPENBLAS_CORETYPE=$$(grep -qw avx512f /proc/cpuinfo && echo SkylakeX || echo Haswell) $(BENCH_CONV) \
	    --cold --out test/bench/results_cold.tsv
	$(BENCH_SCALING) --out test/bench/results_scaling.tsv
	$(BENCH_E2E) --out test/bench/results_e2e.tsv $$([ -d test/bench/ort/node_modules/onnxruntime-node ] || echo --no-ort)
	OPENBLAS_CORETYPE=$$(grep -qw avx512f /proc/cpuinfo && echo SkylakeX || echo Haswell) $(BENCH_BATCH) \
	    --out test/bench/results_batch.tsv
	$(BENCH_GROUP) --out test/bench/results_group.tsv
	$(BENCH_RNN) --out test/bench/results_rnn.tsv $$([ -d test/bench/ort/node_modules/onnxruntime-node ] || echo --no-ort)
	$(BENCH_CONV3D) --clock thread-cpu --out test/bench/results_conv3d.tsv
	$(BENCH_R3D18) --out test/bench/results_r3d18.tsv $$([ -d test/bench/ort/node_modules/onnxruntime-node ] || echo --no-ort)
	@if /usr/bin/python3 -c 'import torch, torchvision' 2>/dev/null; then $(MAKE) --no-print-directory bench-torchvision-run; \
	else echo "bench: no python3-torch/python3-torchvision: the torchvision models are skipped (make bench-torchvision)"; fi
	sh test/bench/report.sh
	@$(MAKE) --no-print-directory PDC_SKIP_DEPS=1 bench-python

# torchvision ResNet-18, VGG-16, MobileNetV2 and ResNet-50 exported to ONNX, dense and pruned in PyTorch,
# pdc against ONNX Runtime (test/bench/torchvision/bench_torchvision.py), then the video models (bench_video.py);
# installs torch if missing.
.PHONY: bench-torchvision bench-torchvision-run
bench-torchvision: deps-bench all
	@[ -n "$(PDC_SKIP_DEPS)" ] || sh .ci/install-deps python3-torch python3-torchvision python3-numpy
	@$(MAKE) --no-print-directory bench-torchvision-run
	sh test/bench/report.sh
bench-torchvision-run:
	/usr/bin/python3 test/bench/torchvision/bench_torchvision.py --pdc $(TOOL) --out test/bench/results_torchvision.tsv \
	    --schedule-out test/bench/results_schedule.tsv
	/usr/bin/python3 test/bench/torchvision/bench_video.py --pdc $(TOOL) --out test/bench/results_video.tsv

# torchvision r3d_18, mc3_18, r2plus1d_18, dense and KGS-pruned in PyTorch: pdc against ONNX Runtime, 1 thread
# (test/bench/torchvision/bench_video.py; also part of bench-torchvision).
.PHONY: bench-video
bench-video: deps-bench all
	/usr/bin/python3 test/bench/torchvision/bench_video.py --pdc $(TOOL) --out test/bench/results_video.tsv
	sh test/bench/report.sh

# The latency model against measured times (docs/predict.md): calibrates this host first (pdc calibrate,
# about 15 s), then ResNet-18, VGG-16, MobileNetV2 and an LSTM, dense and pruned, 1 and 2 threads; then
# pdc plan on ResNet-18 at 50% and 30% of its measured dense time, the results timed (plan_bench.sh).
.PHONY: bench-predict
bench-predict: all $(BENCH_PREDICT)
	$(TOOL) calibrate --threads 2
	@mkdir -p $(BUILD)/bench-predict
	$(BENCH_PREDICT) --out test/bench/results_predict.tsv --save $(BUILD)/bench-predict
	sh test/bench/plan_bench.sh $(BUILD) $(BUILD)/bench-predict

# Kernel auto-tuning against the heuristics (test/bench/bench_tune.c, docs/tuning.md): the VGG-16 and
# ResNet-50 3x3 layers at 4.5x/9x and whole ResNet-18 / VGG-16, at 1 and 2 threads, on the host's ISA
# and with AVX-512 turned off (AVX2); rows appended to test/bench/results_tune.tsv. A subset:
# BENCH_TUNE_ARGS (bench_tune's options) and BENCH_TUNE_ISA (host, avx2, or both: the default); the
# whole models on the host's ISA only: make bench-tune BENCH_TUNE_ARGS='--cases resnet18@,vgg16@' BENCH_TUNE_ISA=host
BENCH_TUNE := $(BUILD)/bench_tune
BENCH_TUNE_ARGS ?=
BENCH_TUNE_ISA ?= host avx2
$(BENCH_TUNE): $(BUILD)/obj/test/bench/bench_tune.o $(BUILD)/obj/test/bench/conv_case.o $(BUILD)/obj/test/bench/models.o \
               $(BUILD)/obj/test/bench/layers.o $(SHLIB)
	$(CC) -o $@ $(filter %.o,$^) -L$(BUILD) -l:$(SONAME) -Wl,-rpath,'$$ORIGIN' $(LDLIBS)
.PHONY: bench-tune
bench-tune: all $(BENCH_TUNE)
	$(if $(filter host,$(BENCH_TUNE_ISA)),$(BENCH_TUNE) --out test/bench/results_tune.tsv $(BENCH_TUNE_ARGS))
	$(if $(filter avx2,$(BENCH_TUNE_ISA)),PDC_CPU_FEATURES=-avx512f $(BENCH_TUNE) --out test/bench/results_tune.tsv $(BENCH_TUNE_ARGS))

# docs/performance.md from the benchmark TSVs, without running the benchmarks again.
.PHONY: perf-report
perf-report:
	@sh test/bench/report.sh docs/performance.md

# The gpu target against cuDNN (test/bench/gpu_bench.c, docs/backends.md "GPU backend"): built only where
# $(CUDA_HOME)/include/cudnn.h exists; it links libpdc.a (for the internal device-time hook) and
# cuDNN + the CUDA runtime from $(CUDA_HOME)/lib64 (rpath) - libpdc itself links no CUDA library.
# Without a GPU it prints "no GPU: skipped" and exits 0.
BENCH_GPU := $(BUILD)/gpu_bench
$(BUILD)/obj/test/bench/gpu_bench.o: PDC_CFLAGS += $(JIT_CFLAGS) -isystem $(CUDA_HOME)/include
$(BENCH_GPU): $(BUILD)/obj/test/bench/gpu_bench.o $(BUILD)/obj/test/bench/conv_case.o $(BUILD)/obj/test/bench/models.o \
              $(BUILD)/obj/test/bench/layers.o $(STLIB)
	$(CC) -o $@ $(filter %.o,$^) $(STLIB) -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcudnn -lcudart \
	    $(LDLIBS)

.PHONY: bench-gpu
bench-gpu:
	@if [ -f $(CUDA_HOME)/include/cudnn.h ]; then \
	  $(MAKE) --no-print-directory PDC_SKIP_DEPS=1 $(BENCH_GPU) && $(BENCH_GPU) --out test/bench/results_gpu.tsv && sh test/bench/report.sh; \
	else echo "bench-gpu: skipped ($(CUDA_HOME)/include/cudnn.h absent)"; fi

install: all
	install -d $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/bin
	install -m 644 include/pdc.h $(DESTDIR)$(PREFIX)/include/pdc.h
	install -m 755 $(SHLIB) $(DESTDIR)$(PREFIX)/lib/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(PREFIX)/lib/libpdc.so
	install -m 644 $(STLIB) $(DESTDIR)$(PREFIX)/lib/libpdc.a
	$(CC) -o $(DESTDIR)$(PREFIX)/bin/pdc $(TOOL_OBJ) -L$(BUILD) -l:$(SONAME) \
	    -Wl,-rpath,'$$ORIGIN/../lib' $(LDLIBS)
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' lib/pdc.pc.in \
	    > $(DESTDIR)$(PREFIX)/lib/pkgconfig/pdc.pc
	install -d $(PYDIR)
	install -m 644 $(PY_SRC) $(PYDIR)/
	@if [ -n "$(HAVE_MPI)" ]; then $(MAKE) --no-print-directory PDC_SKIP_DEPS=1 $(MPI_LIB) && \
	  install -m 644 include/pdc_mpi.h $(DESTDIR)$(PREFIX)/include/pdc_mpi.h && \
	  install -m 755 $(MPI_LIB) $(DESTDIR)$(PREFIX)/lib/libpdc_mpi.so; fi

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/include/pdc.h $(DESTDIR)$(PREFIX)/lib/$(SONAME) $(DESTDIR)$(PREFIX)/lib/libpdc.so \
	    $(DESTDIR)$(PREFIX)/lib/libpdc.a $(DESTDIR)$(PREFIX)/bin/pdc $(DESTDIR)$(PREFIX)/lib/pkgconfig/pdc.pc \
	    $(DESTDIR)$(PREFIX)/include/pdc_mpi.h $(DESTDIR)$(PREFIX)/lib/libpdc_mpi.so
	rm -rf $(PYDIR)

# libpdc_mpi (include/pdc_mpi.h, lib/mpi/): data-parallel training over MPI, a companion library so that libpdc
# keeps no MPI dependency; built when mpicc and mpirun are installed (libopenmpi-dev, openmpi-bin: make deps).
# mpirun as CI runs it: as root (allowed by the environment), oversubscribed (2 cores), shared memory only
# (no network probing in a container; its segments in /tmp, as a container's /dev/shm may be 64 MB), no
# cross-process copies (ptrace may be forbidden), processes not pinned.
MPICC    ?= mpicc
MPICXX   ?= mpicxx
MPIRUN   ?= mpirun
HAVE_MPI := $(shell command -v $(MPICC) >/dev/null 2>&1 && command -v $(MPIRUN) >/dev/null 2>&1 && echo 1)
MPI_LIB  := $(BUILD)/libpdc_mpi.so
MPI_DEMO := $(BUILD)/train_digits_mpi
MPI_CHECK := $(BUILD)/test/mpi/mpi_check
MPI_NO   := echo "mpi: SKIPPED ($(MPICC) or $(MPIRUN) is absent: make deps installs libopenmpi-dev and openmpi-bin)"
export MPI_RUN := env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader \
    OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_btl_vader_backing_directory=/tmp \
    OMPI_MCA_rmaps_base_oversubscribe=1 $(MPIRUN) --bind-to none
MPI_CFLAGS = $(filter-out -fvisibility=hidden -DPDC_BUILDING -fopenmp,$(PDC_CFLAGS)) $(CFLAGS)
.PHONY: mpi test-mpi bench-mpi
mpi:
	@if [ -n "$(HAVE_MPI)" ]; then $(MAKE) --no-print-directory PDC_SKIP_DEPS=1 $(MPI_LIB) $(MPI_DEMO) $(MPI_CHECK); \
	else $(MPI_NO); fi
$(BUILD)/obj/lib/mpi/%.o: lib/mpi/%.c include/pdc_mpi.h include/pdc.h
	@mkdir -p $(@D)
	$(MPICC) $(MPI_CFLAGS) -c $< -o $@
$(MPI_LIB): $(BUILD)/obj/lib/mpi/pdc_mpi.o $(SHLIB)
	$(MPICC) -shared -o $@ $< $(filter -fsanitize=%,$(MPI_CFLAGS)) -L$(BUILD) -l:$(SONAME) -Wl,-rpath,'$$ORIGIN' \
	    -Wl,--no-undefined
$(MPI_DEMO): examples/train_digits_mpi.c examples/example_common.h include/pdc_mpi.h $(MPI_LIB)
	$(MPICC) $(MPI_CFLAGS) -o $@ $< -L$(BUILD) -lpdc_mpi -l:$(SONAME) -Wl,-rpath,'$$ORIGIN'
$(MPI_CHECK): test/mpi/mpi_check.c include/pdc_mpi.h $(MPI_LIB)
	@mkdir -p $(@D)
	$(MPICC) $(MPI_CFLAGS) -o $@ $< -L$(BUILD) -lpdc_mpi -l:$(SONAME) -Wl,-rpath,'$$ORIGIN/../..'
# ResNet-18 (3x32x32, batch 32 per process) dense and pruned on 1 and 2 processes: step time, samples/s,
# gradient floats sent, the wait the overlap did not hide (test/bench/mpi/bench_mpi.c; docs/training.md).
MPI_BENCH := $(BUILD)/bench_mpi
$(MPI_BENCH): test/bench/mpi/bench_mpi.c test/bench/train/bench_nets.c test/bench/train/bench_nets.h include/pdc_mpi.h \
    $(MPI_LIB)
	$(MPICC) $(MPI_CFLAGS) -o $@ $(filter %.c,$^) -L$(BUILD) -lpdc_mpi -l:$(SONAME) -Wl,-rpath,'$$ORIGIN'
bench-mpi: all
	@if [ -z "$(HAVE_MPI)" ]; then $(MPI_NO); else $(MAKE) --no-print-directory PDC_SKIP_DEPS=1 $(MPI_BENCH) && \
	  uptime && for np in 1 2; do $(MPI_RUN) -np $$np $(MPI_BENCH) $(BENCH_MPI_ARGS) || exit 1; done && \
	  $(MPI_RUN) -np 2 $(MPI_BENCH) --overlap 0 $(BENCH_MPI_ARGS); fi

# 1, 2 and 3 processes: bit-identity, checkpoints across process counts, refusals, timeouts, the demo's accuracy.
# Not under SANITIZE: LeakSanitizer reports Open MPI's own allocations (MPI_Init's, never freed) as leaks.
test-mpi: all
	@if [ -n "$(SANITIZE)" ]; then echo "mpi: SKIPPED (SANITIZE=$(SANITIZE): LeakSanitizer reports Open MPI's own allocations; the plain make test runs these jobs)"; \
	elif [ -n "$(HAVE_MPI)" ]; then $(MAKE) --no-print-directory PDC_SKIP_DEPS=1 mpi $(TRAIN_DEMO) && sh test/mpi/mpi.sh $(BUILD); \
	else $(MPI_NO); fi

clean:
	rm -rf build build-san build-tsan $(FUZZ_BUILD)

-include $(LIB_OBJ:.o=.d) $(TOOL_OBJ:.o=.d)

endif # DEPS_FIRST
