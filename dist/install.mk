# dist/install.mk - `make install` / `make uninstall`, PREFIX and DESTDIR
# as usual.  tbpf finds its agents at ../lib/tbpf/ relative to its own
# binary (userspace/cmd/cmd_run.c, live_inproc.c), so the binary is always
# in $(PREFIX)/bin and the agents in $(PREFIX)/lib/tbpf (no multiarch
# libdir: the agents are private to tbpf, not a library others link).
PREFIX         ?= /usr/local
BINDIR         := $(PREFIX)/bin
AGENTDIR       := $(PREFIX)/lib/tbpf
MANDIR         ?= $(PREFIX)/share/man
BASHCOMPDIR    ?= $(PREFIX)/share/bash-completion/completions
SYSTEMDUNITDIR ?= $(PREFIX)/lib/systemd/system
INSTALL        ?= install

TBPF_VERSION_NUM := $(shell sed -n 's/^\#define TBPF_VERSION "\(.*\)"/\1/p' userspace/cmd/version.h)
# The man pages and the unit name installed paths: @BINDIR@ and the like.
subst_paths = sed -e 's|@BINDIR@|$(BINDIR)|g' -e 's|@AGENTDIR@|$(AGENTDIR)|g' \
	-e 's|@UNITDIR@|$(SYSTEMDUNITDIR)|g' -e 's|@VERSION@|$(TBPF_VERSION_NUM)|g' $(1) > $(2) && \
	chmod 0644 $(2)

install: product
	$(INSTALL) -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(AGENTDIR) $(DESTDIR)$(MANDIR)/man1 \
		$(DESTDIR)$(MANDIR)/man8 $(DESTDIR)$(BASHCOMPDIR) $(DESTDIR)$(SYSTEMDUNITDIR)
	$(INSTALL) -m 0755 $(OUT)/tbpf $(DESTDIR)$(BINDIR)/tbpf
	$(INSTALL) -m 0644 $(AGENT_LIBS) $(DESTDIR)$(AGENTDIR)/
	$(call subst_paths,man/tbpf.1,$(DESTDIR)$(MANDIR)/man1/tbpf.1)
	$(call subst_paths,man/tbpf-daemon.8,$(DESTDIR)$(MANDIR)/man8/tbpf-daemon.8)
	$(call subst_paths,dist/tbpf-daemon.service,$(DESTDIR)$(SYSTEMDUNITDIR)/tbpf-daemon.service)
	$(INSTALL) -m 0644 dist/tbpf.bash-completion $(DESTDIR)$(BASHCOMPDIR)/tbpf

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/tbpf $(addprefix $(DESTDIR)$(AGENTDIR)/,$(notdir $(AGENT_LIBS))) \
		$(DESTDIR)$(MANDIR)/man1/tbpf.1 $(DESTDIR)$(MANDIR)/man8/tbpf-daemon.8 \
		$(DESTDIR)$(BASHCOMPDIR)/tbpf $(DESTDIR)$(SYSTEMDUNITDIR)/tbpf-daemon.service
	-rmdir $(DESTDIR)$(AGENTDIR)
