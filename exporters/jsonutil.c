/* jsonutil.c - export stage helper: JSON string escaping (valid UTF-8 out). */
#include <stdint.h>
#include "jsonutil.h"

/* Length of the valid UTF-8 sequence at s, 0 if invalid. */
static int utf8_len(const unsigned char *s)
{
	int n;
	uint32_t cp;
	if (s[0] < 0x80)
		return 1;
	if ((s[0] & 0xE0) == 0xC0)
		n = 2, cp = s[0] & 0x1F;
	else if ((s[0] & 0xF0) == 0xE0)
		n = 3, cp = s[0] & 0x0F;
	else if ((s[0] & 0xF8) == 0xF0)
		n = 4, cp = s[0] & 0x07;
	else
		return 0;
	for (int i = 1; i < n; i++) {
		if ((s[i] & 0xC0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3F);
	}
	if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
	    cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
		return 0;
	return n;
}

void json_str(FILE *out, const char *str)
{
	const unsigned char *s = (const unsigned char *)(str ? str : "");
	putc_unlocked('"', out);
	while (*s) {
		unsigned char c = *s;
		if (c == '"' || c == '\\') {
			putc_unlocked('\\', out);
			putc_unlocked(c, out);
			s++;
		} else if (c < 0x20) {
			switch (c) {
			case '\n': fputs("\\n", out); break;
			case '\t': fputs("\\t", out); break;
			case '\r': fputs("\\r", out); break;
			default: fprintf(out, "\\u%04x", c);
			}
			s++;
		} else if (c < 0x80) {
			putc_unlocked(c, out);
			s++;
		} else {
			int n = utf8_len(s);
			if (!n) {
				fputs("\\ufffd", out);
				s++;
			} else {
				fwrite_unlocked(s, 1, n, out);
				s += n;
			}
		}
	}
	putc_unlocked('"', out);
}
