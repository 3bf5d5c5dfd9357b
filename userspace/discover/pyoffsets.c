/* pyoffsets.c - attach stage: find a target's CPython runtime and the
 * struct offsets the BPF stack walker and the symbolizer need.
 *
 * Tables for 3.10-3.13 were read from CPython's headers and checked with
 * gdb `ptype /o` on debug builds of 3.10.13, 3.11.7, 3.12.1 and 3.13.0
 * (and live on Debian's 3.11.2).  3.13+ also carries _Py_DebugOffsets at
 * the start of _PyRuntime, which overrides the table where it has a field.
 *
 * Maps and ELF symbols come from procmaps.c and elfsym.c (paths through
 * /proc/PID/root, so containers work).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "elfsym.h"
#include "procmaps.h"
#include "pyoffsets.h"
#include "remote.h"

_Static_assert(sizeof(struct tbpf_pyproc) % 8 == 0, "pyproc ABI");

#define NONE TBPF_PYOFF_NONE

int pyoffsets_for_version(unsigned major, unsigned minor, struct tbpf_pyproc *o)
{
	if (major != 3 || minor < 10 || minor > 13)
		return -ENOTSUP;
	memset(o, 0, sizeof(*o));
	o->version = PY_VER(major, minor);
	/* objects common to 3.10-3.13 */
	o->tp_name = 24;
	o->tp_basicsize = 32;
	o->tp_flags = 168;
	o->tp_dictoffset = 288;
	o->tp_mro = 344;
	o->ht_cached_keys = minor >= 12 ? 880 : 872;
	o->str_ascii_data = minor >= 12 ? 40 : 48;
	o->str_compact_data = minor >= 12 ? 56 : 72;
	o->co_filename = 104;
	o->co_name = 112;
	o->co_qualname = NONE;
	o->pad0 = 0;

	switch (minor) {
	case 10:
		o->kind = PYK_FRAMEOBJ;
		o->ts_frame = 24;          /* PyThreadState.frame */
		o->cf_frame = NONE;
		o->fr_previous = 24;       /* f_back */
		o->fr_code = 32;
		o->fr_instr = 96;          /* int f_lasti, in code units */
		o->fr_owner = NONE;
		o->fr_localsplus = 352;
		o->co_code = 48;           /* PyBytesObject *co_code */
		o->co_argcount = 16;
		o->co_varnames = 72;
		o->co_firstlineno = 40;
		o->co_linetable = 120;
		break;
	case 11:
		o->kind = PYK_IFRAME;
		o->ts_frame = 56;          /* cframe */
		o->cf_frame = 8;           /* cframe->current_frame */
		o->fr_code = 32;
		o->fr_previous = 48;
		o->fr_instr = 56;          /* prev_instr */
		o->fr_owner = NONE;        /* 3.11 has no C-stack shim frames */
		o->fr_localsplus = 72;
		o->co_code = 184;          /* co_code_adaptive */
		o->co_argcount = 56;
		o->co_varnames = 96;       /* co_localsplusnames */
		o->co_firstlineno = 72;
		o->co_filename = 112;
		o->co_name = 120;
		o->co_qualname = 128;
		o->co_linetable = 136;
		break;
	case 12:
	case 13:
		o->kind = PYK_IFRAME;
		if (minor == 12) {
			o->ts_frame = 56;  /* cframe */
			o->cf_frame = 0;   /* cframe->current_frame */
			o->co_code = 192;
		} else {
			o->ts_frame = 72;  /* current_frame */
			o->cf_frame = NONE;
			o->co_code = 200;
		}
		o->fr_code = 0;            /* f_code / f_executable */
		o->fr_previous = 8;
		o->fr_instr = 56;          /* prev_instr / instr_ptr */
		o->fr_owner = 70;
		o->fr_localsplus = 72;
		o->co_argcount = 52;
		o->co_varnames = 96;
		o->co_firstlineno = 68;
		o->co_filename = 112;
		o->co_name = 120;
		o->co_qualname = 128;
		o->co_linetable = 136;
		break;
	}
	return 0;
}

int pyoffsets_tss_offset(unsigned major, unsigned minor)
{
	if (major != 3)
		return -ENOTSUP;
	switch (minor) {
	case 10: return 0x248;  /* gilstate.autoTSSkey */
	case 11: return 0x250;  /* gilstate.autoTSSkey */
	case 12: return 0x608;  /* autoTSSkey */
	case 13: return 0x870;  /* autoTSSkey */
	}
	return -ENOTSUP;
}

/* _Py_DebugOffsets (3.13): u64 fields at these byte offsets. */
enum {
	DBG_VERSION = 8, DBG_FREE_THREADED = 16,
	DBG_TS_CURRENT_FRAME = 184,
	DBG_FR_PREVIOUS = 232, DBG_FR_EXECUTABLE = 240, DBG_FR_INSTR = 248,
	DBG_FR_LOCALSPLUS = 256, DBG_FR_OWNER = 264,
	DBG_CO_FILENAME = 280, DBG_CO_NAME = 288, DBG_CO_QUALNAME = 296,
	DBG_CO_LINETABLE = 304, DBG_CO_FIRSTLINENO = 312, DBG_CO_ARGCOUNT = 320,
	DBG_CO_LOCALSPLUSNAMES = 328, DBG_CO_CODE_ADAPTIVE = 344,
	DBG_TP_NAME = 376, DBG_TP_FLAGS = 392,
	DBG_UNI_ASCII_SIZE = 560,
	DBG_SIZE_313 = 584,
};

static int dbg_u16(const uint8_t *b, size_t off, uint16_t *dst)
{
	uint64_t v;

	memcpy(&v, b + off, 8);
	if (v >= NONE)
		return -EINVAL;
	*dst = (uint16_t)v;
	return 0;
}

int pyoffsets_from_debug(const void *buf, size_t len, struct tbpf_pyproc *o,
			 unsigned long *hexversion)
{
	const uint8_t *b = buf;
	uint64_t ver, ft;
	int err = 0;

	if (len < DBG_SIZE_313 || memcmp(b, "xdebugpy", 8))
		return -EINVAL;
	memcpy(&ver, b + DBG_VERSION, 8);
	memcpy(&ft, b + DBG_FREE_THREADED, 8);
	if (hexversion)
		*hexversion = ver;
	if (ft)
		return -ENOTSUP;
	err |= dbg_u16(b, DBG_TS_CURRENT_FRAME, &o->ts_frame);
	o->cf_frame = NONE;
	err |= dbg_u16(b, DBG_FR_PREVIOUS, &o->fr_previous);
	err |= dbg_u16(b, DBG_FR_EXECUTABLE, &o->fr_code);
	err |= dbg_u16(b, DBG_FR_INSTR, &o->fr_instr);
	err |= dbg_u16(b, DBG_FR_LOCALSPLUS, &o->fr_localsplus);
	err |= dbg_u16(b, DBG_FR_OWNER, &o->fr_owner);
	err |= dbg_u16(b, DBG_CO_FILENAME, &o->co_filename);
	err |= dbg_u16(b, DBG_CO_NAME, &o->co_name);
	err |= dbg_u16(b, DBG_CO_QUALNAME, &o->co_qualname);
	err |= dbg_u16(b, DBG_CO_LINETABLE, &o->co_linetable);
	err |= dbg_u16(b, DBG_CO_FIRSTLINENO, &o->co_firstlineno);
	err |= dbg_u16(b, DBG_CO_ARGCOUNT, &o->co_argcount);
	err |= dbg_u16(b, DBG_CO_LOCALSPLUSNAMES, &o->co_varnames);
	err |= dbg_u16(b, DBG_CO_CODE_ADAPTIVE, &o->co_code);
	err |= dbg_u16(b, DBG_TP_NAME, &o->tp_name);
	err |= dbg_u16(b, DBG_TP_FLAGS, &o->tp_flags);
	err |= dbg_u16(b, DBG_UNI_ASCII_SIZE, &o->str_ascii_data);
	if (err)
		return -EINVAL;
	o->kind = PYK_IFRAME;
	/* The walker reads TBPF_PYFRAME_READ bytes per frame. */
	if (o->fr_code > TBPF_PYFRAME_READ - 8 || o->fr_previous > TBPF_PYFRAME_READ - 8 ||
	    o->fr_instr > TBPF_PYFRAME_READ - 8 || o->fr_localsplus > TBPF_PYFRAME_READ - 8 ||
	    o->fr_owner > TBPF_PYFRAME_READ - 1)
		return -ENOTSUP;
	return 0;
}

int pyversion_from_path(const char *path, unsigned *major, unsigned *minor)
{
	const char *base = strrchr(path, '/');
	const char *p;
	unsigned a, b;
	int n = 0;

	base = base ? base + 1 : path;
	p = strncmp(base, "lib", 3) ? base : base + 3;
	if (strncmp(p, "python", 6))
		return -EINVAL;
	if (sscanf(p + 6, "%u.%u%n", &a, &b, &n) != 2 || n == 0)
		return -EINVAL;
	*major = a;
	*minor = b;
	return 0;
}

int pyoffsets_glibc_tsd_block(void)
{
	static int cached;
	static const char marker[] = "tbpf";
	pthread_key_t key;
	const uint8_t *self = (const uint8_t *)pthread_self();
	int off, found = -ENOENT;

	if (cached)
		return cached;
	if (pthread_key_create(&key, NULL))
		return -EAGAIN;
	if (key >= 32 || pthread_setspecific(key, marker)) {
		pthread_key_delete(key);
		return -ERANGE;
	}
	for (off = 0x100; off < 0x800; off += 8) {
		const void *v;

		memcpy(&v, self + off + 16 * key + 8, sizeof(v));
		if (v == marker) {
			found = off;
			break;
		}
	}
	pthread_key_delete(key);
	if (found > 0)
		cached = found;
	return found;
}

/* ---- target process access ------------------------------------------- */

static char *fmt(const char *f, ...)
{
	va_list ap;
	char *s = NULL;

	va_start(ap, f);
	if (vasprintf(&s, f, ap) < 0)
		s = NULL;
	va_end(ap);
	return s;
}

static bool is_python_image(const char *base, void *ctx)
{
	unsigned a, b;

	return !pyversion_from_path(base, &a, &b);
}

/* Address of `name` of the ELF mapped by one of the entries of `path`. */
static int sym_addr(pid_t pid, const struct pm_maps *m, const char *path,
		    struct elf_file *ef, const char *name, uint64_t *addr)
{
	struct elf_sym sym;
	size_t i;
	int err;

	err = elf_file_find_sym(ef, name, &sym);
	if (err)
		return err;
	if (!sym.file_off)
		return -ENOENT;
	for (i = 0; i < m->n; i++) {
		const struct pm_entry *e = &m->v[i];

		if (e->path && !strcmp(e->path, path) &&
		    !procmaps_file_off_to_addr(e, sym.file_off, addr))
			return 0;
	}
	return -ENOENT;
}

/* The image holding _PyRuntime: libpython3.X.so* first, else the
 * python3.X executable itself. */
static int find_runtime(pid_t pid, const struct pm_maps *m, char *img, size_t imglen,
			uint64_t *runtime, uint64_t *cell_type, unsigned *major, unsigned *minor)
{
	char **paths = NULL;
	size_t n = 0, i;
	int pass, err;

	err = procmaps_libs(m, is_python_image, NULL, &paths, &n);
	if (err)
		goto out;
	err = n ? -ESRCH : -ENOENT;
	for (pass = 0; pass < 2 && err; pass++) {
		for (i = 0; i < n && err; i++) {
			const char *base = strrchr(paths[i], '/');
			struct elf_file *ef = NULL;
			char *host;

			base = base ? base + 1 : paths[i];
			if (!strncmp(base, "lib", 3) != !pass)
				continue;  /* libpython on pass 0, executables on 1 */
			host = procmaps_host_path(pid, paths[i]);
			if (!host || elf_file_open(host, &ef)) {
				free(host);
				continue;
			}
			if (!sym_addr(pid, m, paths[i], ef, "_PyRuntime", runtime)) {
				snprintf(img, imglen, "%s", paths[i]);
				pyversion_from_path(paths[i], major, minor);
				if (sym_addr(pid, m, paths[i], ef, "PyCell_Type", cell_type))
					*cell_type = 0;
				err = 0;
			}
			elf_file_close(ef);
			free(host);
		}
	}
out:
	procmaps_free_paths(paths, n);
	return err;
}

int pyproc_detect(pid_t pid, struct tbpf_pyproc *out, char **why)
{
	struct pm_maps m = { 0 };
	int err = procmaps_read(pid, &m);

	if (err) {
		*why = fmt("cannot locate _PyRuntime in process %d: %s", (int)pid, strerror(-err));
		return err;
	}
	err = pyproc_detect_maps(pid, &m, out, why);
	procmaps_free(&m);
	return err;
}

int pyproc_detect_maps(pid_t pid, const struct pm_maps *maps, struct tbpf_pyproc *out,
		       char **why)
{
	char img[PATH_MAX];
	uint64_t runtime = 0, cell_type = 0;
	unsigned major = 0, minor = 0;
	struct { int32_t init; uint32_t key; } tss;
	uint8_t dbg[DBG_SIZE_313];
	int err, off, tsd;

	*why = NULL;
	err = find_runtime(pid, maps, img, sizeof(img), &runtime, &cell_type, &major, &minor);
	if (err == -ENOENT) {
		*why = fmt("no Python interpreter mapped in process %d", (int)pid);
		return -ENOTSUP;
	}
	if (err) {
		*why = fmt("cannot locate _PyRuntime in process %d: %s", (int)pid,
			   strerror(-err));
		return err;
	}
	if (pyoffsets_for_version(major, minor, out)) {
		*why = fmt("Python %u.%u (%s) is not supported for Python stacks "
			   "(3.10 to 3.13 are)", major, minor, img);
		return -ENOTSUP;
	}
	if (minor >= 13) {
		unsigned long hex = 0;

		err = remote_read(pid, runtime, dbg, sizeof(dbg));
		if (!err)
			err = pyoffsets_from_debug(dbg, sizeof(dbg), out, &hex);
		if (err) {
			*why = fmt("Python %u.%u in process %d: unusable _Py_DebugOffsets (%s)",
				   major, minor, (int)pid, strerror(-err));
			return -ENOTSUP;
		}
		if ((hex >> 24) != major || ((hex >> 16) & 0xff) != minor) {
			*why = fmt("Python %s states version %lx, expected %u.%u",
				   img, hex, major, minor);
			return -ENOTSUP;
		}
	}
	out->runtime = runtime;
	out->cell_type = cell_type;
	off = pyoffsets_tss_offset(major, minor);
	err = remote_read(pid, runtime + off, &tss, sizeof(tss));
	if (err) {
		*why = fmt("cannot read process %d memory: %s", (int)pid, strerror(-err));
		return err;
	}
	if (tss.init != 1 || tss.key >= 1024) {
		*why = fmt("Python %u.%u in process %d: thread-state key not found "
			   "(unexpected _PyRuntime layout)", major, minor, (int)pid);
		return -ENOTSUP;
	}
	out->tss_key = tss.key;
	tsd = pyoffsets_glibc_tsd_block();
	if (tsd < 0) {
		*why = fmt("cannot measure glibc's pthread TSD layout: %s", strerror(-tsd));
		return tsd;
	}
	out->tsd_block = tsd;
	return 0;
}
