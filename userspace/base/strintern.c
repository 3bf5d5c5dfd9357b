/* strintern.c - string interning: chunked arena plus open-addressing hash set. */
#include <stdlib.h>
#include <string.h>
#include "strintern.h"

#define CHUNK (64 * 1024)

struct chunk { struct chunk *next; size_t used, cap; char data[]; };

struct strintern {
	struct chunk *chunks;
	const char **slots;
	size_t nslots, count;
};

static uint64_t hash_bytes(const char *s, size_t len)
{
	uint64_t h = 1469598103934665603ULL;  /* FNV-1a */
	for (size_t i = 0; i < len; i++)
		h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
	return h;
}

struct strintern *strintern_new(void)
{
	struct strintern *si = calloc(1, sizeof(*si));
	if (!si)
		return NULL;
	si->nslots = 256;
	si->slots = calloc(si->nslots, sizeof(*si->slots));
	if (!si->slots) {
		free(si);
		return NULL;
	}
	return si;
}

void strintern_free(struct strintern *si)
{
	if (!si)
		return;
	for (struct chunk *c = si->chunks, *n; c; c = n) {
		n = c->next;
		free(c);
	}
	free(si->slots);
	free(si);
}

static char *arena_alloc(struct strintern *si, size_t n)
{
	struct chunk *c = si->chunks;
	if (!c || c->cap - c->used < n) {
		size_t cap = n > CHUNK ? n : CHUNK;
		c = malloc(sizeof(*c) + cap);
		if (!c)
			return NULL;
		c->used = 0;
		c->cap = cap;
		c->next = si->chunks;
		si->chunks = c;
	}
	char *p = c->data + c->used;
	c->used += n;
	return p;
}

static int grow(struct strintern *si)
{
	size_t n = si->nslots * 2;
	const char **slots = calloc(n, sizeof(*slots));
	if (!slots)
		return -1;
	for (size_t i = 0; i < si->nslots; i++) {
		const char *s = si->slots[i];
		if (!s)
			continue;
		size_t j = hash_bytes(s, strlen(s)) & (n - 1);
		while (slots[j])
			j = (j + 1) & (n - 1);
		slots[j] = s;
	}
	free(si->slots);
	si->slots = slots;
	si->nslots = n;
	return 0;
}

const char *strintern_n(struct strintern *si, const char *s, size_t len)
{
	if (!s)
		s = "", len = 0;
	/* stop at an embedded NUL: the interned value is a C string */
	const char *nul = memchr(s, 0, len);
	if (nul)
		len = nul - s;
	if ((si->count + 1) * 2 > si->nslots && grow(si))
		return NULL;
	size_t j = hash_bytes(s, len) & (si->nslots - 1);
	for (; si->slots[j]; j = (j + 1) & (si->nslots - 1)) {
		const char *t = si->slots[j];
		if (strncmp(t, s, len) == 0 && t[len] == 0)
			return t;
	}
	char *p = arena_alloc(si, len + 1);
	if (!p)
		return NULL;
	memcpy(p, s, len);
	p[len] = 0;
	si->slots[j] = p;
	si->count++;
	return p;
}

const char *strintern(struct strintern *si, const char *s)
{
	return strintern_n(si, s, s ? strlen(s) : 0);
}

size_t strintern_count(const struct strintern *si)
{
	return si->count;
}
