/* cmd_report.h - `tbpf report`: turn a capture file into any output format. */
#ifndef TBPF_CMD_REPORT_H
#define TBPF_CMD_REPORT_H

#include <stdint.h>
#include "export.h"

/* tbpf report FILE --format table|json|chrome|perfetto|folded|pprof
 *             [-o OUT] [--sort KEY] [--row-limit N] [--by-overload]
 * argv[0] is "report".  Returns the process exit code: 0 ok, 1 bad or
 * unreadable capture / write failure, 2 usage error. */
int cmd_report(int argc, char **argv);

/* Read capture_path, write format ("table", ...) to out_path (NULL or "-"
 * = stdout).  0 or -errno; on failure *errmsg (when errmsg is not NULL)
 * gets a malloc'd one-line message for the caller to print. */
int export_capture(const char *capture_path, const char *format, const char *out_path,
		   const struct export_opts *o, char **errmsg);

/* What an export saw, for the caller's notes on stderr. */
struct export_summary {
	uint64_t records;          /* BPF records in the capture */
	uint64_t events_dropped;   /* per the capture's end record */
	bool complete;             /* the capture has its end record */
	uint64_t out_bytes;        /* size of out_path afterwards (0 for stdout) */
	/* --profile-memory: frees of memory allocated before the
	 * recording, allocations the BPF map could not keep */
	uint64_t mem_frees_before, mem_map_full;
};

/* export_capture with a summary (sum may be NULL). */
int export_capture_ex(const char *capture_path, const char *format, const char *out_path,
		      const struct export_opts *o, char **errmsg, struct export_summary *sum);

#endif
