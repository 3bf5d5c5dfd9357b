/* elfsym.h - symbols stage: ELF symbol tables, segment offsets and
 * read-only strings of one file (libelf over a read-only mmap). */
#ifndef TBPF_ELFSYM_H
#define TBPF_ELFSYM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct elf_file;

struct elf_sym {
	const char *name;     /* without "@VER"; valid until elf_file_close */
	uint64_t value;       /* st_value (virtual address for ET_DYN/ET_EXEC) */
	uint64_t size;
	uint64_t file_off;    /* file offset of value, 0 if not in a PT_LOAD */
	uint8_t type, bind;   /* STT_*, STB_* */
	bool dynamic;         /* from .dynsym (else .symtab) */
	bool defined;         /* st_shndx != SHN_UNDEF */
	bool version_hidden;  /* "name@VER" rather than the default "name@@VER" */
	const char *version;  /* symbol version name, NULL if none */
};

/* Open and map path read-only.  -errno (-ENOENT, -EACCES) or -EINVAL
 * when it is not an ELF file. */
int elf_file_open(const char *path, struct elf_file **out);
void elf_file_close(struct elf_file *ef);
const char *elf_file_path(const struct elf_file *ef);

/* Every named symbol of .symtab, then of .dynsym.  A non-zero return of cb
 * stops the walk and is returned. */
int elf_file_for_each_sym(struct elf_file *ef,
			  int (*cb)(const struct elf_sym *s, void *ctx), void *ctx);
/* Only .dynsym (dynamic=true) or only .symtab (false); -ENOENT when the
 * file has no such table. */
int elf_file_for_each_sym_in(struct elf_file *ef, bool dynamic,
			     int (*cb)(const struct elf_sym *s, void *ctx), void *ctx);

/* vaddr -> file offset: vaddr - p_vaddr + p_offset of the PT_LOAD whose
 * file-backed part holds vaddr.  -ENOENT if none does. */
int elf_file_vaddr_to_off(struct elf_file *ef, uint64_t vaddr, uint64_t *off);
/* The inverse: file offset -> vaddr.  When PT_LOADs overlap in the file,
 * an executable one is preferred if prefer_exec, else the first. */
int elf_file_off_to_vaddr(struct elf_file *ef, uint64_t off, bool prefer_exec,
			  uint64_t *vaddr);

/* Exact name lookup over .dynsym then .symtab (a linear scan), defined
 * symbols first.
 * "name" matches versioned dynamic symbols too (the default "@@" version
 * first); "name@VER" / "name@@VER" match only that version. -ENOENT. */
int elf_file_find_sym(struct elf_file *ef, const char *name, struct elf_sym *out);

/* vaddr -> enclosing function symbol (FUNC and IFUNC of .symtab and
 * .dynsym; a table sorted once, on first use).  *name stays valid until
 * elf_file_close.  -ENOENT when no function covers vaddr.  The first call
 * builds the table: not thread-safe. */
int elf_file_symbolize(struct elf_file *ef, uint64_t vaddr, const char **name,
		       uint64_t *off_in_sym);

/* NUL-terminated strings starting with prefix ("" = every non-empty
 * string) in the read-only data sections (.rodata*, and other allocated,
 * non-writable, non-executable PROGBITS except unwind tables).  Only
 * strings that start a string (preceded by NUL or the section start) are
 * seen.  A non-zero return of cb stops and is returned. */
int elf_file_for_each_rostring(struct elf_file *ef, const char *prefix,
			       int (*cb)(const char *s, void *ctx), void *ctx);

/* The same sections' NUL-terminated strings that contain needle
 * (non-empty; -EINVAL otherwise), each once, in file order.  Much faster
 * than visiting every string when few contain the needle. */
int elf_file_for_each_rostring_with(struct elf_file *ef, const char *needle,
				    int (*cb)(const char *s, void *ctx), void *ctx);

/* True when some defined .dynsym (or, without one, .symtab) symbol's name
 * starts with prefix. */
bool elf_file_has_sym_prefix(struct elf_file *ef, const char *prefix);

/* Raw views for code scans.  The whole mapped file. */
int elf_file_image(const struct elf_file *ef, const uint8_t **image, size_t *size);
/* Give back the pages of the file's mapping read so far (they stay in the
 * page cache; pointers into the image stay valid and fault them back). */
void elf_file_drop_pages(struct elf_file *ef);
/* The k-th executable PT_LOAD's vaddr, file offset and file size; -ENOENT
 * past the last. */
int elf_file_exec_segment(const struct elf_file *ef, size_t k, uint64_t *vaddr,
			  uint64_t *off, uint64_t *size);
/* The address an R_X86_64_RELATIVE relocation with this addend writes
 * (the first such); -ENOENT when none does. */
int elf_file_find_relative(struct elf_file *ef, uint64_t addend, uint64_t *where);

#endif
