/* json_cost.h - what a jansson value costs in memory, for decoders that
 * must bound what one input makes them build (internal, not public API).
 *
 * The JSON, YAML and protobuf decoders of request bodies add these up as
 * they build a tree and stop once the sum passes their budget, before the
 * allocation that would pass it. The figures are jansson 2.14's heap use
 * on glibc x86-64, malloc's chunk overhead included, measured by
 * tests/unit/test_json_cost.c (which fails when jansson starts taking
 * more). Small input can cost much more than its size: "{}" is 2 bytes of
 * JSON and 224 bytes of memory (jansson allocates an object's first eight
 * hash buckets at once), which is why decoders count memory and not
 * input bytes.
 *
 * Shared values (true, false, null; scalars a YAML alias repeats) cost
 * nothing but the slot that holds them. */
#ifndef CKUBE_COMMON_JSON_COST_H
#define CKUBE_COMMON_JSON_COST_H

#include <jansson.h>
#include <stddef.h>

/* An object with no members (its struct and eight hash buckets). */
#define JCOST_OBJECT ((size_t)224)
/* An array with no elements (its struct and a table of eight). */
#define JCOST_ARRAY ((size_t)128)
/* One member of an object, key of `klen` bytes (the value is counted on
 * its own): jansson's pair, rounded to malloc's 16 bytes, and up to 32
 * bytes of hash buckets when the table has just doubled. */
#define JCOST_MEMBER(klen) ((size_t)120 + (size_t)(klen))
/* One array slot, the table's doubling included. */
#define JCOST_ELEMENT ((size_t)16)
/* A string of `len` bytes: its struct and its copy of the text. */
#define JCOST_STRING(len) ((size_t)80 + (size_t)(len))
/* An integer or a real. */
#define JCOST_NUMBER ((size_t)32)

/* The most memory one byte of compact JSON can cost, over a whole
 * document: `{},` (3 bytes) in an array is an object and a slot, 240
 * bytes. Everything else costs less per byte (`[],` 48, `"":{},` 58,
 * nesting `[[...]]` 72, `"",` 32, `0,` 24), and the root's `{}` (112 per
 * byte) comes once: a document of n bytes costs at most
 * JCOST_MAX_PER_BYTE * n + JCOST_OBJECT. */
#define JCOST_MAX_PER_BYTE ((size_t)80)

/* What the server lets `len` bytes of untrusted JSON decode into: 1 MiB
 * plus 64 times their size (well-formed objects take at most ~25 times
 * their JSON), and never more than JCOST_MAX_DECODED (32 MiB, what a
 * 1.5 MiB object as dense as well-formed objects get can need). The API
 * server's request bodies, and the JSON texts inside them (managed
 * fields' path elements, kubectl's last-applied annotation), are read
 * within it. */
#define JCOST_MAX_DECODED ((size_t)32 << 20)
static inline size_t ckube__decode_budget(size_t len)
{
    size_t rel = ((size_t)1 << 20) + 64 * len;
    return rel < JCOST_MAX_DECODED ? rel : JCOST_MAX_DECODED;
}

/* The memory a tree takes, as the prices above add up (shared values are
 * counted each time they appear). Stops adding once past `limit` and
 * returns a value above it, so measuring a huge tree against a bound
 * costs little. */
size_t ckube__json_cost(const json_t *v, size_t limit);

#endif
