/* cmd_report.h - `tbpf report`: turn a capture file into any output format. */
#ifndef TBPF_CMD_REPORT_H
#define TBPF_CMD_REPORT_H

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

#endif
