# Export benchmark: `make bench-export` (10M events -> perfetto; EVENTS=, FORMATS= to change).
$(OUT)/bench/export_bench: bench/export_bench.c $(OUT)/libtbpf.a $(USER_HDRS)
	$(call msg,LINK,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) $(ALL_CFLAGS) $< $(OUT)/libtbpf.a -o $@ $(LDLIBS)

tools: $(OUT)/bench/export_bench

.PHONY: bench-export
bench-export: $(OUT)/bench/export_bench
	$(Q)$(OUT)/bench/export_bench $(or $(EVENTS),10000000) $(or $(BENCH_DIR),/tmp) $(or $(FORMATS),perfetto table chrome folded pprof)
