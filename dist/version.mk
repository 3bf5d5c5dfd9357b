# dist/version.mk - the commit `tbpf --version` prints, embedded at build
# time from the source tree's own git (a tree without .git, such as a
# release tarball or a package's source copy, embeds none and --version
# prints the version alone).  `make TBPF_COMMIT=...` sets it by hand.
ifeq ($(origin TBPF_COMMIT),undefined)
TBPF_COMMIT := $(if $(wildcard .git),$(shell git rev-parse --short=12 HEAD 2>/dev/null)$(shell \
	git diff --quiet HEAD -- 2>/dev/null || echo -dirty))
endif

# Rewritten only when the commit changes, so an unchanged tree relinks
# nothing; only cmd_info.c reads it.
.PHONY: FORCE
$(OUT)/tbpf_commit.h: FORCE | $(OUT)
	$(Q)printf '#define TBPF_COMMIT "%s"\n' '$(TBPF_COMMIT)' > $@.tmp
	$(Q)if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv $@.tmp $@; fi

$(OUT)/obj/userspace/cmd/cmd_info.o: $(OUT)/tbpf_commit.h
