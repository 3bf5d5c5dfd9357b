/* elfsym.c - symbols stage: ELF symbol tables, segment offsets and
 * read-only strings of one file (libelf over a read-only mmap). */
#include "elfsym.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>

struct symtab {
	bool present;
	Elf_Data *data;
	size_t count;
	const char *str;  /* linked string table, NUL-terminated at strsz-1 */
	size_t strsz;
	const Elf64_Sym *raw; /* direct view when the layout is native */
};

struct fsym {
	uint64_t value, size;
	const char *name;
	uint8_t bind;
	uint8_t rank;  /* lower is preferred among aliases */
};

struct elf_file {
	int fd;
	Elf *elf;
	char *path;
	const char *image;
	size_t image_size;
	GElf_Ehdr ehdr;
	GElf_Phdr *load;   /* PT_LOAD headers only */
	size_t nload;
	struct symtab symtab, dynsym;
	const uint16_t *versym;  /* parallel to .dynsym, NULL if none */
	size_t nversym;
	const char **vernames;   /* version index -> name */
	size_t nvernames;
	struct fsym *funcs;      /* sorted, built by elf_file_symbolize */
	size_t nfuncs;
	bool funcs_built;
};

static bool elf_native(const struct elf_file *ef)
{
	return ef->ehdr.e_ident[EI_CLASS] == ELFCLASS64 &&
	       ef->ehdr.e_ident[EI_DATA] ==
		       (__BYTE_ORDER == __LITTLE_ENDIAN ? ELFDATA2LSB : ELFDATA2MSB);
}

static const char *image_str(const struct elf_file *ef, size_t shndx, size_t *size)
{
	Elf_Scn *scn = elf_getscn(ef->elf, shndx);
	GElf_Shdr sh;

	if (!scn || !gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS ||
	    sh.sh_offset > ef->image_size || sh.sh_size > ef->image_size - sh.sh_offset ||
	    sh.sh_size == 0)
		return NULL;
	const char *s = ef->image + sh.sh_offset;
	if (s[sh.sh_size - 1] != '\0')
		return NULL;
	*size = sh.sh_size;
	return s;
}

static void load_symtab(struct elf_file *ef, Elf_Scn *scn, const GElf_Shdr *sh,
			struct symtab *t)
{
	if (t->present || sh->sh_entsize == 0)
		return;
	Elf_Data *d = elf_getdata(scn, NULL);
	if (!d)
		return;
	t->str = image_str(ef, sh->sh_link, &t->strsz);
	if (!t->str)
		return;
	t->data = d;
	t->count = sh->sh_size / sh->sh_entsize;
	if (elf_native(ef) && sh->sh_entsize == sizeof(Elf64_Sym) &&
	    sh->sh_offset <= ef->image_size &&
	    sh->sh_size <= ef->image_size - sh->sh_offset &&
	    sh->sh_offset % _Alignof(Elf64_Sym) == 0)
		t->raw = (const Elf64_Sym *)(ef->image + sh->sh_offset);
	t->present = true;
}

static int set_vername(struct elf_file *ef, size_t ndx, const char *name)
{
	if (ndx >= ef->nvernames) {
		const char **v = realloc(ef->vernames, (ndx + 1) * sizeof(*v));
		if (!v)
			return -ENOMEM;
		memset(v + ef->nvernames, 0, (ndx + 1 - ef->nvernames) * sizeof(*v));
		ef->vernames = v;
		ef->nvernames = ndx + 1;
	}
	ef->vernames[ndx] = name;
	return 0;
}

/* Version index -> name from .gnu.version_d (definitions) and
 * .gnu.version_r (needed versions). */
static int load_versions(struct elf_file *ef, Elf_Scn *scn, const GElf_Shdr *sh)
{
	Elf_Data *d = elf_getdata(scn, NULL);
	size_t strsz;
	const char *str = image_str(ef, sh->sh_link, &strsz);
	size_t off = 0;

	if (!d || !str)
		return 0;
	for (size_t i = 0; i < sh->sh_info; i++) {
		size_t ndx, name, next, aux;
		if (sh->sh_type == SHT_GNU_verdef) {
			GElf_Verdef vd;
			GElf_Verdaux va;
			if (!gelf_getverdef(d, off, &vd) ||
			    !gelf_getverdaux(d, off + vd.vd_aux, &va))
				break;
			ndx = vd.vd_ndx;
			name = va.vda_name;
			next = vd.vd_next;
			if (name < strsz && set_vername(ef, ndx & 0x7fff, str + name))
				return -ENOMEM;
		} else {
			GElf_Verneed vn;
			if (!gelf_getverneed(d, off, &vn))
				break;
			aux = off + vn.vn_aux;
			for (size_t j = 0; j < vn.vn_cnt; j++) {
				GElf_Vernaux va;
				if (!gelf_getvernaux(d, aux, &va))
					break;
				ndx = va.vna_other & 0x7fff;
				if (va.vna_name < strsz && set_vername(ef, ndx, str + va.vna_name))
					return -ENOMEM;
				if (!va.vna_next)
					break;
				aux += va.vna_next;
			}
			next = vn.vn_next;
		}
		if (!next)
			break;
		off += next;
	}
	return 0;
}

int elf_file_open(const char *path, struct elf_file **out)
{
	struct elf_file *ef;
	size_t nphdr, shstrndx;
	Elf_Scn *scn = NULL;
	int err;

	*out = NULL;
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -EINVAL;
	ef = calloc(1, sizeof(*ef));
	if (!ef)
		return -ENOMEM;
	ef->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (ef->fd < 0) {
		err = -errno;
		free(ef);
		return err;
	}
	ef->path = strdup(path);
	ef->elf = elf_begin(ef->fd, ELF_C_READ_MMAP, NULL);
	if (!ef->path) {
		err = -ENOMEM;
		goto fail;
	}
	if (!ef->elf || elf_kind(ef->elf) != ELF_K_ELF || !gelf_getehdr(ef->elf, &ef->ehdr)) {
		err = -EINVAL;
		goto fail;
	}
	ef->image = elf_rawfile(ef->elf, &ef->image_size);
	if (!ef->image || elf_getphdrnum(ef->elf, &nphdr)) {
		err = -EINVAL;
		goto fail;
	}
	ef->load = calloc(nphdr ? nphdr : 1, sizeof(*ef->load));
	if (!ef->load) {
		err = -ENOMEM;
		goto fail;
	}
	for (size_t i = 0; i < nphdr; i++) {
		GElf_Phdr ph;
		if (gelf_getphdr(ef->elf, i, &ph) && ph.p_type == PT_LOAD)
			ef->load[ef->nload++] = ph;
	}
	if (elf_getshdrstrndx(ef->elf, &shstrndx))
		shstrndx = 0;
	while ((scn = elf_nextscn(ef->elf, scn))) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh))
			continue;
		switch (sh.sh_type) {
		case SHT_SYMTAB:
			load_symtab(ef, scn, &sh, &ef->symtab);
			break;
		case SHT_DYNSYM:
			load_symtab(ef, scn, &sh, &ef->dynsym);
			break;
		case SHT_GNU_versym:
			if (sh.sh_offset <= ef->image_size &&
			    sh.sh_size <= ef->image_size - sh.sh_offset &&
			    sh.sh_offset % 2 == 0 && elf_native(ef)) {
				ef->versym = (const uint16_t *)(ef->image + sh.sh_offset);
				ef->nversym = sh.sh_size / 2;
			}
			break;
		case SHT_GNU_verdef:
		case SHT_GNU_verneed:
			err = load_versions(ef, scn, &sh);
			if (err)
				goto fail;
			break;
		}
	}
	*out = ef;
	return 0;
fail:
	elf_file_close(ef);
	return err;
}

void elf_file_close(struct elf_file *ef)
{
	if (!ef)
		return;
	if (ef->elf)
		elf_end(ef->elf);
	if (ef->fd >= 0)
		close(ef->fd);
	free(ef->funcs);
	free(ef->vernames);
	free(ef->load);
	free(ef->path);
	free(ef);
}

const char *elf_file_path(const struct elf_file *ef)
{
	return ef->path;
}

int elf_file_vaddr_to_off(struct elf_file *ef, uint64_t vaddr, uint64_t *off)
{
	for (size_t i = 0; i < ef->nload; i++) {
		const GElf_Phdr *p = &ef->load[i];
		if (vaddr >= p->p_vaddr && vaddr - p->p_vaddr < p->p_filesz) {
			*off = vaddr - p->p_vaddr + p->p_offset;
			return 0;
		}
	}
	return -ENOENT;
}

int elf_file_off_to_vaddr(struct elf_file *ef, uint64_t off, bool prefer_exec,
			  uint64_t *vaddr)
{
	const GElf_Phdr *best = NULL;

	for (size_t i = 0; i < ef->nload; i++) {
		const GElf_Phdr *p = &ef->load[i];
		if (off < p->p_offset || off - p->p_offset >= p->p_filesz)
			continue;
		if (!best || (prefer_exec && (p->p_flags & PF_X) && !(best->p_flags & PF_X)))
			best = p;
	}
	if (!best)
		return -ENOENT;
	*vaddr = off - best->p_offset + best->p_vaddr;
	return 0;
}

static bool get_sym(const struct symtab *t, size_t i, GElf_Sym *s)
{
	if (t->raw) {
		const Elf64_Sym *r = &t->raw[i];
		s->st_name = r->st_name;
		s->st_info = r->st_info;
		s->st_other = r->st_other;
		s->st_shndx = r->st_shndx;
		s->st_value = r->st_value;
		s->st_size = r->st_size;
		return true;
	}
	return gelf_getsym(t->data, i, s) != NULL;
}

static bool fill_sym(struct elf_file *ef, const struct symtab *t, bool dynamic,
		     size_t i, struct elf_sym *out)
{
	GElf_Sym s;

	if (!get_sym(t, i, &s) || s.st_name == 0 || s.st_name >= t->strsz)
		return false;
	out->name = t->str + s.st_name;
	out->value = s.st_value;
	out->size = s.st_size;
	out->type = GELF_ST_TYPE(s.st_info);
	out->bind = GELF_ST_BIND(s.st_info);
	out->dynamic = dynamic;
	out->defined = s.st_shndx != SHN_UNDEF;
	out->file_off = 0;
	if (out->defined && s.st_shndx != SHN_ABS && out->type != STT_TLS &&
	    elf_file_vaddr_to_off(ef, s.st_value, &out->file_off))
		out->file_off = 0;
	out->version = NULL;
	out->version_hidden = false;
	if (dynamic && ef->versym && i < ef->nversym) {
		uint16_t v = ef->versym[i];
		uint16_t ndx = v & 0x7fff;
		if (ndx > 1 && ndx < ef->nvernames)
			out->version = ef->vernames[ndx];
		out->version_hidden = (v & 0x8000) != 0;
	}
	return true;
}

/* The file is mapped read-only (ELF_C_READ_MMAP): pages read once
 * (libtorch's 78 MB .strtab, 18 MB .rodata, 270 MB of code) stay in tbpf's
 * RSS until close although they are page cache the target shares.  Walks
 * over big tables drop them as they go (tbpf's own memory);
 * a later read faults them back from the cache unchanged. */
void elf_file_drop_pages(struct elf_file *ef)
{
	uintptr_t a = (uintptr_t)ef->image, pg = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t start = a & ~(pg - 1);

	if (ef->image && ef->image_size)
		madvise((void *)start, ef->image_size + (a - start), MADV_DONTNEED);
}

#define DROP_EVERY 8192

int elf_file_for_each_sym_in(struct elf_file *ef, bool dynamic,
			     int (*cb)(const struct elf_sym *s, void *ctx), void *ctx)
{
	const struct symtab *t = dynamic ? &ef->dynsym : &ef->symtab;
	struct elf_sym es;

	if (!t->present)
		return -ENOENT;
	for (size_t i = 1; i < t->count; i++) {
		if (i % DROP_EVERY == 0)
			elf_file_drop_pages(ef);
		if (!fill_sym(ef, t, dynamic, i, &es))
			continue;
		int r = cb(&es, ctx);
		if (r)
			return r;
	}
	elf_file_drop_pages(ef);
	return 0;
}

int elf_file_for_each_sym(struct elf_file *ef,
			  int (*cb)(const struct elf_sym *s, void *ctx), void *ctx)
{
	int r = elf_file_for_each_sym_in(ef, false, cb, ctx);

	if (r && r != -ENOENT)
		return r;
	r = elf_file_for_each_sym_in(ef, true, cb, ctx);
	return r == -ENOENT ? 0 : r;
}

/* Split "name@VER" / "name@@VER": returns the length of the bare name. */
static size_t split_version(const char *q, const char **ver, bool *hidden)
{
	const char *at = strchr(q, '@');

	*ver = NULL;
	*hidden = false;
	if (!at)
		return strlen(q);
	if (at[1] == '@') {
		*ver = at + 2;
	} else {
		*ver = at + 1;
		*hidden = true;
	}
	return (size_t)(at - q);
}

static int find_in(struct elf_file *ef, bool dynamic, const char *q, size_t qlen,
		   const char *ver, bool hidden, struct elf_sym *out, int *best)
{
	const struct symtab *t = dynamic ? &ef->dynsym : &ef->symtab;
	struct elf_sym es;

	if (!t->present)
		return 0;
	for (size_t i = 1; i < t->count; i++) {
		GElf_Sym s;
		if (i % DROP_EVERY == 0)
			elf_file_drop_pages(ef);
		if (!get_sym(t, i, &s) || s.st_name >= t->strsz)
			continue;
		const char *n = t->str + s.st_name;
		if (strncmp(n, q, qlen) || n[qlen])
			continue;
		if (!fill_sym(ef, t, dynamic, i, &es))
			continue;
		if (ver && (!es.version || strcmp(es.version, ver) || es.version_hidden != hidden))
			continue;
		/* rank: defined before undefined, default version before hidden */
		int rank = (es.defined ? 0 : 2) + (es.version_hidden ? 1 : 0);
		if (rank < *best) {
			*best = rank;
			*out = es;
			if (rank == 0)
				return 1;
		}
	}
	return 0;
}

int elf_file_find_sym(struct elf_file *ef, const char *name, struct elf_sym *out)
{
	const char *ver;
	bool hidden;
	size_t qlen = split_version(name, &ver, &hidden);
	int best = 1 << 30;

	if (find_in(ef, true, name, qlen, ver, hidden, out, &best))
		return 0;
	if (!ver && find_in(ef, false, name, qlen, NULL, false, out, &best))
		return 0;
	return best < (1 << 30) ? 0 : -ENOENT;
}

bool elf_file_has_sym_prefix(struct elf_file *ef, const char *prefix)
{
	const struct symtab *t = ef->dynsym.present ? &ef->dynsym : &ef->symtab;
	size_t plen = strlen(prefix);

	for (size_t i = 1; t->present && i < t->count; i++) {
		GElf_Sym s;
		if (!get_sym(t, i, &s) || s.st_shndx == SHN_UNDEF || s.st_name >= t->strsz)
			continue;
		if (!strncmp(t->str + s.st_name, prefix, plen))
			return true;
	}
	return false;
}

/* ---- address -> function -------------------------------------------- */

static int fsym_cmp(const void *a, const void *b)
{
	const struct fsym *x = a, *y = b;

	if (x->value != y->value)
		return x->value < y->value ? -1 : 1;
	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	return strcmp(x->name, y->name);
}

static int add_func(const struct elf_sym *s, void *ctx)
{
	struct elf_file *ef = ctx;

	if ((s->type != STT_FUNC && s->type != STT_GNU_IFUNC) || !s->defined ||
	    !s->value || !*s->name)
		return 0;
	struct fsym *f = &ef->funcs[ef->nfuncs++];
	f->value = s->value;
	f->size = s->size;
	f->name = s->name;
	f->bind = s->bind;
	/* Among aliases prefer sized, then global, weak, local symbols, and
	 * names without a compiler suffix (".cold", ".isra.0"). */
	f->rank = (s->size ? 0 : 8) +
		  (s->bind == STB_GLOBAL ? 0 : s->bind == STB_WEAK ? 2 : 4) +
		  (strchr(s->name, '.') ? 1 : 0);
	return 0;
}

static int build_funcs(struct elf_file *ef)
{
	size_t cap = (ef->symtab.present ? ef->symtab.count : 0) +
		     (ef->dynsym.present ? ef->dynsym.count : 0);
	size_t j = 0;

	ef->funcs = malloc((cap ? cap : 1) * sizeof(*ef->funcs));
	if (!ef->funcs)
		return -ENOMEM;
	elf_file_for_each_sym(ef, add_func, ef);
	qsort(ef->funcs, ef->nfuncs, sizeof(*ef->funcs), fsym_cmp);
	/* one entry per address: the preferred alias */
	for (size_t i = 0; i < ef->nfuncs; i++)
		if (!j || ef->funcs[j - 1].value != ef->funcs[i].value)
			ef->funcs[j++] = ef->funcs[i];
	ef->nfuncs = j;
	ef->funcs_built = true;
	return 0;
}

int elf_file_symbolize(struct elf_file *ef, uint64_t vaddr, const char **name,
		       uint64_t *off_in_sym)
{
	size_t lo = 0, hi;

	if (!ef->funcs_built) {
		int err = build_funcs(ef);
		if (err)
			return err;
	}
	hi = ef->nfuncs;
	while (lo < hi) {  /* first entry with value > vaddr */
		size_t mid = lo + (hi - lo) / 2;
		if (ef->funcs[mid].value <= vaddr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return -ENOENT;
	const struct fsym *f = &ef->funcs[lo - 1];
	if (f->size && vaddr - f->value >= f->size) {
		/* a sized function that ends before vaddr: only an enclosing
		 * larger function just before it can still hold vaddr */
		const struct fsym *g = NULL;
		for (size_t k = lo - 1; k-- > 0 && lo - 1 - k <= 16;)
			if (ef->funcs[k].size && vaddr - ef->funcs[k].value < ef->funcs[k].size) {
				g = &ef->funcs[k];
				break;
			}
		if (!g)
			return -ENOENT;
		f = g;
	}
	*name = f->name;
	if (off_in_sym)
		*off_in_sym = vaddr - f->value;
	return 0;
}

/* ---- read-only strings ---------------------------------------------- */

static bool rodata_section(const char *name, const GElf_Shdr *sh)
{
	if (sh->sh_type != SHT_PROGBITS || !(sh->sh_flags & SHF_ALLOC) ||
	    (sh->sh_flags & (SHF_WRITE | SHF_EXECINSTR)))
		return false;
	if (!name)
		return true;
	static const char *const skip[] = { ".eh_frame", ".eh_frame_hdr",
		".gcc_except_table", ".interp", ".gnu_debuglink", ".gnu_debugaltlink" };
	for (size_t i = 0; i < sizeof(skip) / sizeof(skip[0]); i++)
		if (!strcmp(name, skip[i]))
			return false;
	return strncmp(name, ".note", 5) != 0;
}

static int scan_strings(const char *b, size_t n, const char *prefix, size_t plen,
			int (*cb)(const char *s, void *ctx), void *ctx)
{
	size_t i = 0;

	if (plen) {
		while (i + plen <= n) {
			const char *p = memmem(b + i, n - i, prefix, plen);
			if (!p)
				break;
			size_t at = (size_t)(p - b);
			const char *end = memchr(p, '\0', n - at);
			if (!end)
				break;
			if (at == 0 || b[at - 1] == '\0') {
				int r = cb(p, ctx);
				if (r)
					return r;
			}
			i = (size_t)(end - b) + 1;
		}
		return 0;
	}
	while (i < n) {
		const char *end = memchr(b + i, '\0', n - i);
		if (!end)
			break;
		if (end != b + i) {
			int r = cb(b + i, ctx);
			if (r)
				return r;
		}
		i = (size_t)(end - b) + 1;
	}
	return 0;
}

/* Every string containing needle, once each, in order: memmem finds the
 * needle, the string around it is bounded by NULs (or the section). */
static int scan_containing(const char *b, size_t n, const char *needle, size_t nlen,
			   int (*cb)(const char *s, void *ctx), void *ctx)
{
	size_t i = 0;

	while (i + nlen <= n) {
		const char *p = memmem(b + i, n - i, needle, nlen), *start, *end;

		if (!p)
			break;
		end = memchr(p, '\0', n - (size_t)(p - b));
		if (!end)
			break;
		start = memrchr(b + i, '\0', (size_t)(p - (b + i)));
		start = start ? start + 1 : b + i;
		/* i is a string start (0 or past a NUL), so start >= b + i */
		int r = cb(start, ctx);
		if (r)
			return r;
		i = (size_t)(end - b) + 1;
	}
	return 0;
}

static int for_each_rostring(struct elf_file *ef, const char *prefix, bool containing,
			     int (*cb)(const char *s, void *ctx), void *ctx);

int elf_file_for_each_rostring(struct elf_file *ef, const char *prefix,
			       int (*cb)(const char *s, void *ctx), void *ctx)
{
	return for_each_rostring(ef, prefix, false, cb, ctx);
}

int elf_file_for_each_rostring_with(struct elf_file *ef, const char *needle,
				    int (*cb)(const char *s, void *ctx), void *ctx)
{
	if (!*needle)
		return -EINVAL;
	return for_each_rostring(ef, needle, true, cb, ctx);
}

#define SCAN_STEP (1u << 20)

/* A string section in steps of about SCAN_STEP bytes, each cut just after a
 * NUL so no string spans two steps, giving each step's pages back: the
 * 18 MB .rodata of torch 2.8 read in one go held all of it resident. */
static int scan_chunked(struct elf_file *ef, const char *b, size_t n, const char *prefix,
			size_t plen, bool containing, int (*cb)(const char *s, void *ctx), void *ctx)
{
	size_t off = 0;
	int r = 0;

	while (off < n && !r) {
		size_t len = n - off;

		if (len > SCAN_STEP) {
			const char *nul = memchr(b + off + SCAN_STEP, '\0', n - off - SCAN_STEP);
			len = nul ? (size_t)(nul - (b + off)) + 1 : n - off;
		}
		r = containing ? scan_containing(b + off, len, prefix, plen, cb, ctx)
			       : scan_strings(b + off, len, prefix, plen, cb, ctx);
		elf_file_drop_pages(ef);
		off += len;
	}
	return r;
}

static int for_each_rostring(struct elf_file *ef, const char *prefix, bool containing,
			     int (*cb)(const char *s, void *ctx), void *ctx)
{
	size_t shstrndx, plen = strlen(prefix);
	Elf_Scn *scn = NULL;
	bool any = false;

	if (elf_getshdrstrndx(ef->elf, &shstrndx))
		shstrndx = 0;
	while ((scn = elf_nextscn(ef->elf, scn))) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh))
			continue;
		const char *name = shstrndx ? elf_strptr(ef->elf, shstrndx, sh.sh_name) : NULL;
		if (!rodata_section(name, &sh))
			continue;
		if (sh.sh_offset > ef->image_size || sh.sh_size > ef->image_size - sh.sh_offset)
			continue;
		any = true;
		int r = scan_chunked(ef, ef->image + sh.sh_offset, sh.sh_size, prefix, plen,
				     containing, cb, ctx);
		if (r)
			return r;
	}
	if (any)
		return 0;
	/* No section headers: read-only, non-executable PT_LOADs. */
	for (size_t i = 0; i < ef->nload; i++) {
		const GElf_Phdr *p = &ef->load[i];
		if ((p->p_flags & (PF_W | PF_X)) || p->p_offset > ef->image_size ||
		    p->p_filesz > ef->image_size - p->p_offset)
			continue;
		int r = containing ? scan_containing(ef->image + p->p_offset, p->p_filesz, prefix, plen, cb, ctx)
				   : scan_strings(ef->image + p->p_offset, p->p_filesz, prefix, plen, cb, ctx);
		if (r)
			return r;
	}
	return 0;
}

/* ---- raw views for code scans (the boxed-call finder) ------- */

int elf_file_image(const struct elf_file *ef, const uint8_t **image, size_t *size)
{
	if (!ef->image)
		return -ENOENT;
	*image = (const uint8_t *)ef->image;
	*size = ef->image_size;
	return 0;
}

int elf_file_exec_segment(const struct elf_file *ef, size_t k, uint64_t *vaddr,
			  uint64_t *off, uint64_t *size)
{
	for (size_t i = 0; i < ef->nload; i++) {
		const GElf_Phdr *p = &ef->load[i];

		if (!(p->p_flags & PF_X) || p->p_offset > ef->image_size ||
		    p->p_filesz > ef->image_size - p->p_offset)
			continue;
		if (k-- == 0) {
			*vaddr = p->p_vaddr;
			*off = p->p_offset;
			*size = p->p_filesz;
			return 0;
		}
	}
	return -ENOENT;
}

int elf_file_find_relative(struct elf_file *ef, uint64_t addend, uint64_t *where)
{
	Elf_Scn *scn = NULL;

	while ((scn = elf_nextscn(ef->elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_RELA || !sh.sh_entsize)
			continue;
		if (!(d = elf_getdata(scn, NULL)))
			continue;
		for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Rela r;

			if (!gelf_getrela(d, (int)i, &r))
				break;
			if (GELF_R_TYPE(r.r_info) == R_X86_64_RELATIVE &&
			    (uint64_t)r.r_addend == addend) {
				*where = r.r_offset;
				return 0;
			}
		}
	}
	return -ENOENT;
}
