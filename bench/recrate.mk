# recrate.mk - the recording-rate benchmark's target program (bench/record_rate.sh).
RECRATE := $(OUT)/bench/recrate
tools: $(RECRATE)/recrate
$(RECRATE):
	$(Q)mkdir -p $@
$(RECRATE)/libtorch_cpu-bench.so: bench/recrate/bench_ops.cpp | $(RECRATE)
	$(call msg,CXX,$@)
	$(Q)$(CXX) -O2 -fno-omit-frame-pointer -mno-omit-leaf-frame-pointer -fPIC -shared $< -o $@
$(RECRATE)/recrate: bench/recrate/recrate.cpp $(RECRATE)/libtorch_cpu-bench.so
	$(call msg,CXX,$@)
	$(Q)$(CXX) -O2 $< -o $@ -L$(RECRATE) -l:libtorch_cpu-bench.so -Wl,-rpath,'$$ORIGIN' -lpthread
