/* mem_tables.h - export stage, --profile-memory: what is still
 * live at the end by the op and layer that allocated it, largest first,
 * and each device's peak with what held it; as text after the op table
 * and as the JSON member "memory". */
#ifndef TBPF_MEM_TABLES_H
#define TBPF_MEM_TABLES_H

#include <stdint.h>
#include <stdio.h>

struct tbpf_model;

/* Rows per section (live at end, holders of a peak). */
#define MEM_TABLE_ROWS 20

int mem_tables_print(FILE *out, const struct tbpf_model *m);
/* "memory": {...} (no leading comma). */
int mem_json_member(FILE *out, const struct tbpf_model *m);

#endif
