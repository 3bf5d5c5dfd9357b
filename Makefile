# tbpf build: BPF object -> skeleton -> user space -> tests.
# Everything lands under build/.  `make V=1` shows the commands.
.DELETE_ON_ERROR:
.SECONDARY:

OUT        ?= build
CC         ?= gcc
CLANG      ?= clang
BPFTOOL    ?= $(shell command -v bpftool || echo /usr/sbin/bpftool)
CUDA_HOME  ?= /usr/local/cuda
ARCH       := x86

# CFLAGS, CPPFLAGS and LDFLAGS belong to whoever builds (a packager's
# `dpkg-buildflags`, `make CFLAGS=...`): the project's own flags live in
# TBPF_* so a CFLAGS given on the command line replaces only the optimisation
# and hardening choice, never the include path.  The user's flags come last
# so they win.
CFLAGS     ?= -O2 -g
# User space is one folder per pipeline stage (docs/architecture.md):
# cmd -> fleet | collect -> attach -> discover, capture -> symbolize -> join
# -> model -> exporters, base below all.  The exporters, fed by the model
# only, sit at the top level beside bpf/ and userspace/ (a new format is
# one file there).  Each folder is on the include path.
STAGES     := cmd fleet collect attach discover capture symbolize join model bus base
STAGE_DIRS := $(addprefix userspace/,$(STAGES)) exporters
TBPF_WARN  := -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers
TBPF_CPPFLAGS := -D_GNU_SOURCE -I$(OUT) -Ibpf $(addprefix -I,$(STAGE_DIRS))
TBPF_CFLAGS := $(TBPF_WARN) -std=gnu11
ALL_CFLAGS  = $(TBPF_CPPFLAGS) $(CPPFLAGS) $(TBPF_CFLAGS) $(CFLAGS)
LDLIBS     += -lbpf -lelf -lz -lzstd -lmicrohttpd -lcurl -lstdc++ -lpthread -lm
BPF_CFLAGS := -O2 -g -target bpf -D__TARGET_ARCH_$(ARCH) -I$(OUT) -Ibpf -Wall \
              -Wno-unused-function -Wno-compare-distinct-pointer-types

ifeq ($(V),1)
Q =
msg =
else
Q = @
msg = @printf '  %-8s %s\n' "$(1)" "$(2)";
endif

USER_SRCS  := $(foreach d,$(STAGE_DIRS),$(wildcard $(d)/*.c))
USER_OBJS  := $(patsubst %.c,$(OUT)/obj/%.o,$(USER_SRCS))
LIB_OBJS   := $(filter-out $(OUT)/obj/userspace/cmd/main.o,$(USER_OBJS))
BPF_SRCS   := $(wildcard bpf/*.bpf.c)
# The ABI shared with user space: tbpf_abi.h and the feature headers it
# includes (bpf/abi/); every user of the records depends on all of them.
ABI_HDRS   := bpf/tbpf_abi.h $(wildcard bpf/abi/*.h)
BPF_HDRS   := $(wildcard bpf/*.h) $(wildcard bpf/abi/*.h)
SKELS      := $(patsubst bpf/%.bpf.c,$(OUT)/%.skel.h,$(BPF_SRCS))
UNIT_SRCS  := $(wildcard tests/unit/test_*.c)
UNIT_BINS  := $(patsubst tests/unit/%.c,$(OUT)/tests/%,$(UNIT_SRCS))
USER_HDRS  := $(foreach d,$(STAGE_DIRS),$(wildcard $(d)/*.h))

# `make` builds the product: the tbpf binary and the agents it loads into
# targets (agent/Makefile.inc adds them to `product`).  The helpers the
# tests and benchmarks run are `make tools` (`make test` builds them).
.PHONY: all product clean test unit e2e tools install uninstall
all: product
product: $(OUT)/tbpf

$(OUT) $(OUT)/tests:
	$(Q)mkdir -p $@

$(OUT)/vmlinux.h: | $(OUT)
	$(call msg,BTF,$@)
	$(Q)$(BPFTOOL) btf dump file /sys/kernel/btf/vmlinux format c > $@

$(OUT)/%.bpf.o: bpf/%.bpf.c $(BPF_HDRS) $(OUT)/vmlinux.h | $(OUT)
	$(call msg,BPF,$@)
	$(Q)$(CLANG) $(BPF_CFLAGS) -c $< -o $@.tmp
	$(Q)$(BPFTOOL) gen object $@ $@.tmp && rm -f $@.tmp

$(OUT)/%.skel.h: $(OUT)/%.bpf.o
	$(call msg,SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< > $@

$(OUT)/obj/%.o: %.c $(USER_HDRS) $(BPF_HDRS) $(SKELS) | $(OUT)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) $(ALL_CFLAGS) -c $< -o $@

$(OUT)/libtbpf.a: $(LIB_OBJS)
	$(call msg,AR,$@)
	$(Q)rm -f $@ && ar rcs $@ $^

$(OUT)/tbpf: $(OUT)/obj/userspace/cmd/main.o $(OUT)/libtbpf.a
	$(call msg,LINK,$@)
	$(Q)$(CC) $(TBPF_CFLAGS) $(CFLAGS) $(LDFLAGS) $^ -o $@ $(LDLIBS)

$(OUT)/tests/%: tests/unit/%.c $(OUT)/libtbpf.a $(USER_HDRS) | $(OUT)/tests
	$(call msg,TEST,$@)
	$(Q)$(CC) $(ALL_CFLAGS) -Itests/unit $(LDFLAGS) $< $(OUT)/libtbpf.a -o $@ -lcmocka $(LDLIBS)

# Helper programs the end-to-end tests and benchmarks run (built, not
# downloaded): see tests/native/Makefile.inc.
tools:
-include tests/native/Makefile.inc
-include agent/Makefile.inc
include dist/version.mk dist/install.mk
-include tests/formats/Makefile.inc tests/fuzz/Makefile.inc bench/export_bench.mk bench/recrate.mk

# Unit suites, then the golden report outputs of the kept captures
# (tests/fixtures/golden/check.sh: byte-identical or fail) and the stage
# order of the includes (tests/unit/check_stages.sh), no merge-conflict
# markers (check_markers.sh), the e2e test catalogue up to date
# (check_catalogue.sh).
unit: $(UNIT_BINS) $(OUT)/tbpf
	$(Q)fail=0; for t in $(UNIT_BINS); do $$t || fail=1; done; \
	tests/fixtures/golden/check.sh $(OUT)/tbpf || fail=1; \
	tests/unit/check_stages.sh || fail=1; \
	tests/unit/check_markers.sh || fail=1; \
	tests/unit/check_catalogue.sh || fail=1; \
	tests/unit/rf_layout.sh || fail=1; exit $$fail

test: all tools unit
	$(Q)tests/e2e/run.sh

clean:
	rm -rf $(OUT)
