/* Fuzzes the static token file reader (apiserver/authentication/tokenfile).
 *
 * Each input is parsed as a token file; nothing may crash, leak or read
 * past the input. The result is checked against a second reader written
 * here the way Go's encoding/csv is (a line at a time: CR LF made LF, a
 * CR before the end of input dropped, blank lines skipped, a quoted field
 * continued over the following lines) plus kube-apiserver's tokenfile
 * rules: both must agree on whether the file parses, on how many tokens
 * it holds and, for every token, on its user. Fields are C strings on
 * both sides (cut at a NUL byte), as the reader keeps them. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "apiserver/authentication/tokenfile.h"
#include "ckube/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* ---- the reference reader ------------------------------------------------ */

typedef struct bytes {
    char *p;
    size_t n, cap;
} bytes;

static void b_add(bytes *b, const char *s, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        b->cap = (b->n + n + 1) * 2;
        b->p = realloc(b->p, b->cap);
        if (!b->p)
            abort();
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

/* A field as a C string (cut at a NUL, as the reader's are). */
static char *b_take(bytes *b)
{
    char *s = strndup(b->p ? b->p : "", b->n);
    if (!s)
        abort();
    free(b->p);
    *b = (bytes){0};
    return s;
}

typedef struct reader {
    const char *p, *end;
} reader;

/* Go's readLine: the next line with its "\n" (CR LF made "\n"; a CR
 * just before the end dropped), or false at the end of input. */
static bool read_line(reader *r, const char **line, size_t *len)
{
    if (r->p >= r->end)
        return false;
    const char *nl = memchr(r->p, '\n', (size_t)(r->end - r->p));
    size_t n = nl ? (size_t)(nl - r->p) + 1 : (size_t)(r->end - r->p);
    /* Lines are views of the input, so the normalizations are done by
     * the callers through line_len/has_nl. */
    *line = r->p;
    *len = n;
    r->p += n;
    if (!nl && n && (*line)[n - 1] == '\r')
        (*len)--;
    return true;
}

/* The line's bytes without its end ("\n" or "\r\n"), and whether it
 * had one: a line of Go's readLine is content + ("\n" if nl). */
static size_t content_len(const char *line, size_t len, bool *nl)
{
    *nl = len && line[len - 1] == '\n';
    if (!*nl)
        return len;
    if (len >= 2 && line[len - 2] == '\r')
        return len - 2;
    return len - 1;
}

typedef struct rec {
    char **f;
    size_t n;
} rec;

static void rec_add(rec *r, bytes *b)
{
    r->f = realloc(r->f, (r->n + 1) * sizeof *r->f);
    if (!r->f)
        abort();
    r->f[r->n++] = b_take(b);
}

static void rec_free(rec *r)
{
    for (size_t i = 0; i < r->n; i++)
        free(r->f[i]);
    free(r->f);
    *r = (rec){0};
}

/* Go's readRecord. 1: a record; 0: end of input; -1: a parse error. */
static int read_record(reader *rd, rec *out)
{
    const char *line;
    size_t len;
    bool nl;
    size_t clen;
    for (;;) {
        if (!read_line(rd, &line, &len))
            return 0;
        clen = content_len(line, len, &nl);
        if (clen) /* else a blank line */
            break;
    }
    /* The rest of the current line: line[i..clen) then "\n" if nl. */
    size_t i = 0;
    bytes b = {0};
    for (;;) {
        if (i >= clen || line[i] != '"') {
            /* An unquoted field: to the next comma or the line's end. */
            const char *comma = memchr(line + i, ',', clen - i);
            size_t end = comma ? (size_t)(comma - line) : clen;
            if (memchr(line + i, '"', end - i)) {
                free(b.p);
                rec_free(out);
                return -1; /* bare " in non-quoted-field */
            }
            b_add(&b, line + i, end - i);
            rec_add(out, &b);
            if (!comma)
                return 1;
            i = end + 1;
            continue;
        }
        i++; /* the opening quote */
        for (;;) {
            const char *q = i < clen ? memchr(line + i, '"', clen - i) : NULL;
            if (q) {
                size_t at = (size_t)(q - line);
                b_add(&b, line + i, at - i);
                i = at + 1;
                if (i < clen && line[i] == '"') {
                    b_add(&b, "\"", 1);
                    i++;
                } else if (i < clen && line[i] == ',') {
                    i++;
                    rec_add(out, &b);
                    break; /* the next field */
                } else if (i == clen) {
                    rec_add(out, &b);
                    return 1; /* the record's end */
                } else {
                    free(b.p);
                    rec_free(out);
                    return -1; /* extraneous " in quoted-field */
                }
            } else if (i < clen || nl) {
                /* The line ends inside the quotes: its rest, and on. */
                b_add(&b, line + i, clen - i);
                if (nl)
                    b_add(&b, "\n", 1);
                if (!read_line(rd, &line, &len)) {
                    free(b.p);
                    rec_free(out);
                    return -1; /* missing " in quoted-field */
                }
                clen = content_len(line, len, &nl);
                i = 0;
            } else {
                free(b.p);
                rec_free(out);
                return -1; /* missing " at the end of input */
            }
        }
    }
}

/* kube-apiserver's tokenfile over the records: the users by token, the
 * later record's for a token given twice. */
typedef struct ref_entry {
    char *token, *name, *uid;
    char **groups;
    size_t ngroups;
} ref_entry;

typedef struct ref_file {
    ref_entry *e;
    size_t n;
} ref_file;

static void entry_clear(ref_entry *e)
{
    free(e->token);
    free(e->name);
    free(e->uid);
    for (size_t i = 0; i < e->ngroups; i++)
        free(e->groups[i]);
    free(e->groups);
    *e = (ref_entry){0};
}

static void ref_free(ref_file *f)
{
    for (size_t i = 0; i < f->n; i++)
        entry_clear(&f->e[i]);
    free(f->e);
    *f = (ref_file){0};
}

/* strings.Split(s, ","), each group once (auth_user_add_group's rule). */
static void split_groups(ref_entry *e, const char *s)
{
    for (;;) {
        const char *comma = strchr(s, ',');
        size_t n = comma ? (size_t)(comma - s) : strlen(s);
        bool seen = false;
        for (size_t i = 0; i < e->ngroups && !seen; i++)
            seen = strlen(e->groups[i]) == n && !memcmp(e->groups[i], s, n);
        if (!seen) {
            e->groups = realloc(e->groups, (e->ngroups + 1) * sizeof *e->groups);
            if (!e->groups || !(e->groups[e->ngroups++] = strndup(s, n)))
                abort();
        }
        if (!comma)
            return;
        s = comma + 1;
    }
}

/* 0 with *f filled, or -1 (a parse error or a short record). */
static int ref_parse(const char *data, size_t size, ref_file *f)
{
    reader rd = {data, data + size};
    *f = (ref_file){0};
    for (;;) {
        rec r = {0};
        int rc = read_record(&rd, &r);
        if (rc == 0)
            return 0;
        if (rc < 0 || r.n < 3) {
            rec_free(&r);
            ref_free(f);
            return -1;
        }
        if (!*r.f[0]) {
            rec_free(&r);
            continue; /* an empty token: skipped */
        }
        ref_entry e = {0};
        e.token = r.f[0];
        e.name = r.f[1];
        e.uid = r.f[2];
        r.f[0] = r.f[1] = r.f[2] = NULL;
        if (r.n >= 4)
            split_groups(&e, r.f[3]);
        rec_free(&r);
        size_t i = 0;
        while (i < f->n && strcmp(f->e[i].token, e.token))
            i++;
        if (i < f->n) {
            entry_clear(&f->e[i]);
        } else {
            f->e = realloc(f->e, (f->n + 1) * sizeof *f->e);
            if (!f->e)
                abort();
            f->n++;
        }
        f->e[i] = e;
    }
}

/* ---- the target ------------------------------------------------------------ */

static void check_user(const tokenfile *t, const ref_entry *e)
{
    auth_user *u = tokenfile_lookup(t, e->token);
    if (!u || strcmp(u->name, e->name) || strcmp(u->uid, e->uid) || u->ngroups != e->ngroups)
        abort();
    for (size_t i = 0; i < u->ngroups; i++)
        if (strcmp(u->groups[i], e->groups[i]))
            abort();
    auth_user_unref(u);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static bool quiet;
    if (!quiet) {
        /* The empty and duplicate token warnings would flood stderr. */
        ckube_log_set_flag("logtostderr", "false", NULL);
        ckube_log_set_flag("log-file", "/dev/null", NULL);
        quiet = true;
    }
    const char *s = (const char *)data;
    char *err = NULL;
    tokenfile *t = tokenfile_parse("fuzz.csv", s, size, &err);
    ref_file ref;
    int ref_rc = ref_parse(s, size, &ref);
    if (!t) {
        /* A refusal says why and names the file, and the reference
         * refuses it too. */
        if (!err || !strstr(err, "'fuzz.csv'") || ref_rc == 0)
            abort();
        free(err);
        return 0;
    }
    if (err || ref_rc != 0 || tokenfile_count(t) != ref.n)
        abort();
    for (size_t i = 0; i < ref.n; i++)
        check_user(t, &ref.e[i]);
    /* Near misses are no tokens: a known token with a byte more or less,
     * the empty token, and the whole input as one. */
    auth_user *u = tokenfile_lookup(t, "");
    if (u)
        abort();
    for (size_t i = 0; i < ref.n && i < 8; i++) {
        const char *tok = ref.e[i].token;
        size_t n = strlen(tok);
        char *longer = malloc(n + 2);
        if (!longer)
            abort();
        memcpy(longer, tok, n);
        longer[n] = '\x01';
        longer[n + 1] = '\0';
        bool known = false;
        for (size_t j = 0; j < ref.n && !known; j++)
            known = !strcmp(ref.e[j].token, longer);
        u = tokenfile_lookup(t, longer);
        if (!u != !known)
            abort();
        auth_user_unref(u);
        longer[n - 1] = '\0'; /* one byte less (n >= 1: no token is empty) */
        known = false;
        for (size_t j = 0; j < ref.n && !known; j++)
            known = !strcmp(ref.e[j].token, longer);
        u = tokenfile_lookup(t, longer);
        if (!u != !known)
            abort();
        auth_user_unref(u);
        free(longer);
    }
    char *whole = strndup(s, size);
    if (!whole)
        abort();
    u = tokenfile_lookup(t, whole);
    auth_user_unref(u);
    free(whole);
    /* A user looked up outlives the table. */
    u = ref.n ? tokenfile_lookup(t, ref.e[0].token) : NULL;
    tokenfile_free(t);
    if (u && strcmp(u->name, ref.e[0].name))
        abort();
    auth_user_unref(u);
    ref_free(&ref);
    return 0;
}
