/* C names for ckube-gen (names.h). */
#include "gen/names.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

/* C17's keywords, the macros of <stdbool.h> and <stddef.h> a generated
 * file includes, the members every generated struct has, and C++'s
 * keywords (a generated header can be included from C++, as libckube's
 * are: "template" is "template_", "namespace" is "namespace_"). Sorted
 * as strcmp sorts. */
static const char *const RESERVED[] = {
    "NULL",          "_Alignas",  "_Alignof",      "_Atomic",      "_Bool",
    "_Complex",      "_Generic",  "_Imaginary",    "_Noreturn",    "_Static_assert",
    "_Thread_local", "alignas",   "alignof",       "and",          "and_eq",
    "asm",           "auto",      "base",          "bitand",       "bitor",
    "bool",          "break",     "case",          "catch",        "char",
    "char16_t",      "char32_t",  "char8_t",       "class",        "co_await",
    "co_return",     "co_yield",  "compl",         "concept",      "const",
    "const_cast",    "consteval", "constexpr",     "constinit",    "continue",
    "decltype",      "default",   "delete",        "do",           "double",
    "dynamic_cast",  "else",      "enum",          "explicit",     "export",
    "extern",        "false",     "float",         "for",          "friend",
    "goto",          "if",        "inline",        "int",          "long",
    "mutable",       "namespace", "new",           "noexcept",     "not",
    "not_eq",        "nullptr",   "operator",      "or",           "or_eq",
    "private",       "protected", "public",        "register",     "reinterpret_cast",
    "requires",      "restrict",  "return",        "short",        "signed",
    "sizeof",        "static",    "static_assert", "static_cast",  "struct",
    "switch",        "template",  "this",          "thread_local", "throw",
    "true",          "try",       "typedef",       "typeid",       "typename",
    "union",         "unknown",   "unsigned",      "using",        "virtual",
    "void",          "volatile",  "wchar_t",       "while",        "xor",
    "xor_eq",
};

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

bool gen_reserved(const char *s)
{
    return bsearch(&s, RESERVED, sizeof RESERVED / sizeof *RESERVED, sizeof *RESERVED, cmp_str) !=
           NULL;
}

char *gen_c_name(const char *name)
{
    size_t n = strlen(name);
    /* at most one '_' before each character, a leading '_', a trailing '_' */
    char *out = malloc(2 * n + 3);
    if (!out)
        return NULL;
    size_t o = 0;
    bool alnum_seen = false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)name[i];
        if (!isalnum(c) || c > 0x7f) {
            if (o && out[o - 1] != '_')
                out[o++] = '_';
            continue;
        }
        alnum_seen = true;
        if (isupper(c) && o && out[o - 1] != '_') {
            unsigned char prev = (unsigned char)name[i - 1];
            unsigned char next = i + 1 < n ? (unsigned char)name[i + 1] : 0;
            /* a word starts: after a lower-case letter or a digit
             * ("podCIDR"), or at the last capital of an acronym that a
             * lower-case word follows ("IPAddress") */
            unsigned char after = i + 2 < n ? (unsigned char)name[i + 2] : 0;
            /* (an acronym's plural is no new word: "hostIPs" is host_ips) */
            bool plural = next == 's' && !islower(after);
            if (islower(prev) || isdigit(prev) || (isupper(prev) && islower(next) && !plural))
                out[o++] = '_';
        }
        out[o++] = (char)tolower(c);
    }
    while (o && out[o - 1] == '_')
        o--;
    out[o] = 0;
    if (!alnum_seen || !o) {
        free(out);
        return NULL;
    }
    if (isdigit((unsigned char)out[0])) { /* not an identifier's start */
        memmove(out + 1, out, o + 1);
        out[0] = '_';
        o++;
    }
    if (gen_reserved(out)) {
        out[o++] = '_';
        out[o] = 0;
    }
    return out;
}

struct gen_nameset {
    char **names, **paths;
    size_t n, cap;
};

gen_nameset *gen_nameset_new(void)
{
    return calloc(1, sizeof(gen_nameset));
}

void gen_nameset_free(gen_nameset *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n; i++) {
        free(s->names[i]);
        free(s->paths[i]);
    }
    free(s->names);
    free(s->paths);
    free(s);
}

int gen_nameset_add(gen_nameset *s, const char *name, const char *path, const char **first)
{
    /* (linear: a struct has tens of members, a package hundreds of
     * types; the generator runs once per build) */
    for (size_t i = 0; i < s->n; i++) {
        if (!strcmp(s->names[i], name)) {
            *first = s->paths[i];
            return 1;
        }
    }
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 16;
        char **nn = realloc(s->names, cap * sizeof *nn);
        if (!nn)
            return -1;
        s->names = nn;
        char **np = realloc(s->paths, cap * sizeof *np);
        if (!np)
            return -1;
        s->paths = np;
        s->cap = cap;
    }
    char *n = strdup(name), *p = strdup(path);
    if (!n || !p) {
        free(n);
        free(p);
        return -1;
    }
    s->names[s->n] = n;
    s->paths[s->n] = p;
    s->n++;
    return 0;
}

char *gen_c_part(const char *name)
{
    char *c = gen_c_name(name);
    size_t n = c ? strlen(c) : 0;
    if (n > 1 && c[n - 1] == '_') {
        c[n - 1] = 0;
        if (!gen_reserved(c)) /* (a name of its own that ends in '_') */
            c[n - 1] = '_';
    }
    return c;
}
