/* jsonutil.h - export stage helper: JSON string escaping (valid UTF-8 out). */
#ifndef TBPF_JSONUTIL_H
#define TBPF_JSONUTIL_H
#include <stdio.h>
/* Write s as a JSON string with quotes; invalid UTF-8 becomes U+FFFD. */
void json_str(FILE *out, const char *s);
#endif
