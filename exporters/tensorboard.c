/* tensorboard.c - export stage: a TensorBoard run folder.
 *
 * What torch.profiler's tensorboard_trace_handler writes: one Kineto trace
 * per worker and active cycle, {host}_{pid}.{time_ns}.pt.trace.json, read
 * by TensorBoard's PyTorch Profiler plugin and by HTA.  A worker is a
 * process of the capture; a cycle the active steps of the schedule
 * (steps.h), or the whole capture without one.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "capture.h"
#include "export.h"
#include "steps.h"
#include "strf.h"

static int mkdir_p(const char *dir)
{
	char *p = strdup(dir);

	if (!p)
		return -ENOMEM;
	for (char *s = p + 1; *s; s++)
		if (*s == '/') {
			*s = '\0';
			if (mkdir(p, 0755) && errno != EEXIST) {
				int e = -errno;
				free(p);
				return e;
			}
			*s = '/';
		}
	free(p);
	if (mkdir(dir, 0755) && errno != EEXIST)
		return -errno;
	return 0;
}

/* Wall clock of a CLOCK_MONOTONIC time of the capture. */
static uint64_t real_of(const struct capture_meta *m, uint64_t mono)
{
	if (!m->run.present || !m->run.start_real_ns)
		return mono;
	return m->run.start_real_ns + mono - m->run.start_mono_ns;
}

static int write_one(const char *dir, struct capture_reader *r, const struct export_opts *o,
		     uint32_t pid, uint64_t mono, FILE *note, char **errmsg)
{
	const struct capture_meta *m = capture_reader_meta(r);
	const char *host = m->run.host && m->run.host[0] ? m->run.host : "localhost";
	char *path = strf("%s/%s_%u.%llu.pt.trace.json", dir, host, pid,
			  (unsigned long long)real_of(m, mono));
	struct export_opts eo = *o;
	FILE *f;
	int err;

	if (!path)
		return -ENOMEM;
	f = fopen(path, "we");
	if (!f) {
		err = -errno;
		*errmsg = strf("%s: %s", path, strerror(-err));
		free(path);
		return err;
	}
	eo.only_pid = pid;
	eo.trace_name = path;
	err = export_chrome(f, r, &eo);
	if (fclose(f) && !err)
		err = -errno;
	if (err) {
		*errmsg = strf("%s: %s", path, strerror(-err));
		unlink(path);
	} else if (note && eo.step_window) {
		fprintf(note, "tbpf: wrote %s (ProfilerStep#%u-%u)\n", path, eo.step_first,
			eo.step_first + eo.step_count - 1);
	} else if (note) {
		fprintf(note, "tbpf: wrote %s\n", path);
	}
	free(path);
	return err;
}

int export_tensorboard(const char *dir, struct capture_reader *r, const struct export_opts *o,
		       const struct step_schedule *sched, FILE *note, char **errmsg)
{
	const struct capture_meta *m = capture_reader_meta(r);
	struct export_opts eo = *o;
	struct steps st = { 0 };
	int err, files = 0;

	*errmsg = NULL;
	err = mkdir_p(dir);
	if (err) {
		*errmsg = strf("cannot create %s: %s", dir, strerror(-err));
		return err;
	}
	if (!eo.steps) {
		err = steps_from_capture(r, eo.step_label, &st);
		if (err) {
			*errmsg = strf("reading steps: %s", strerror(-err));
			steps_free(&st);
			return err;
		}
		eo.steps = &st;
	}
	for (size_t i = 0; i < m->nprocs && !err; i++) {
		uint32_t pid = m->procs[i].pid, first, count;
		const struct step_proc *p = steps_proc(eo.steps, pid);
		uint64_t b, e;

		if (!sched || !sched->set) {
			eo.step_window = false;
			err = write_one(dir, r, &eo, pid, m->run.start_mono_ns, note, errmsg);
			files += !err;
			continue;
		}
		for (uint32_t c = 0; !err && steps_cycle(sched, c, &first, &count); c++) {
			/* only whole cycles, as on_trace_ready sees them */
			if (!steps_range(p, first, &b, &e) || !steps_range(p, first + count - 1, &e, &e))
				break;
			eo.step_window = true;
			eo.step_first = first;
			eo.step_count = count;
			err = write_one(dir, r, &eo, pid, b, note, errmsg);
			files += !err;
		}
	}
	if (!err && !files && note)
		fprintf(note, "tbpf: no TensorBoard trace written: no process showed a whole "
			      "scheduled cycle of steps (step boundary: %s)\n",
			eo.step_label ? eo.step_label : STEPS_DEFAULT_LABEL);
	steps_free(&st);
	return err;
}
