/* The static token file (tokenfile.h). */
#include "apiserver/authentication/tokenfile.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckube/log.h"
#include "common/text.h"
#include "common/xalloc.h"

#define MAX_FILE (16u << 20) /* a token file is a few KB; refuse what is not */

typedef struct entry {
    char *token;
    auth_user *user;
    size_t recno; /* its record's number in the file, for messages */
} entry;

struct tokenfile {
    entry *e; /* sorted by token, unique */
    size_t n;
};

/* One CSV record's fields (malloc'd strings). */
typedef struct record {
    char **f;
    size_t n, cap;
} record;

static void record_clear(record *r)
{
    for (size_t i = 0; i < r->n; i++)
        free(r->f[i]);
    r->n = 0;
}

static void record_add(record *r, ckube__strbuf *b)
{
    if (r->n == r->cap) {
        r->cap = r->cap ? 2 * r->cap : 8;
        r->f = xrealloc(r->f, r->cap * sizeof *r->f);
    }
    r->f[r->n++] = b->s ? b->s : xstrdup("");
    *b = (ckube__strbuf){0};
}

/* The CSV reader's state over the whole input. */
typedef struct csv {
    const char *p, *end;
    int line, col; /* of p, 1-based, for errors as Go's csv.ParseError */
    const char *start;
} csv;

/* A parse error in Go's csv.ParseError words (the record's first line
 * said only when the error is on another). */
static void parse_error(char **err, const char *path, int rec_line, int line, int col,
                        const char *what)
{
    if (rec_line != line)
        ckube__set_err(err,
                       "token file '%s': record on line %d; parse error on line %d, column %d: %s",
                       path, rec_line, line, col, what);
    else
        ckube__set_err(err, "token file '%s': parse error on line %d, column %d: %s", path, line,
                       col, what);
}

/* Where Go's reader reports a quoted field the input ends in: the input's
 * last line, just past its end counted as Go reads lines (CR LF as one
 * byte, a CR at the very end dropped, and with it a last line that is
 * only that CR). c is at the end of input. */
static void eof_position(const csv *c, int *line, int *col)
{
    const char *e = c->end;
    if (e > c->start && e[-1] == '\r' && (e - 1 == c->start || e[-2] == '\n'))
        e--;
    *line = c->line;
    bool nl = e > c->start && e[-1] == '\n';
    if (nl) {
        e--; /* the last line's "\n", a column of its own */
        (*line)--;
    }
    const char *b = e;
    while (b > c->start && b[-1] != '\n')
        b--;
    size_t n = (size_t)(e - b);
    if (n && e[-1] == '\r')
        n--;
    *col = (int)n + 1 + (nl ? 1 : 0);
}

static int next(csv *c)
{
    if (c->p >= c->end)
        return -1;
    int ch = (unsigned char)*c->p++;
    if (ch == '\n') {
        c->line++;
        c->col = 1;
    } else {
        c->col++;
    }
    return ch;
}

/* Whether c is at a line end: "\n", "\r\n", or the end of input. */
static bool at_eol(const csv *c)
{
    return c->p >= c->end || *c->p == '\n' ||
           (*c->p == '\r' && c->p + 1 < c->end && c->p[1] == '\n') ||
           (*c->p == '\r' && c->p + 1 == c->end);
}

static void skip_eol(csv *c)
{
    if (c->p < c->end && *c->p == '\r')
        next(c);
    if (c->p < c->end && *c->p == '\n')
        next(c);
}

/* Reads one record into r. 1: a record; 0: end of input; -1 with *err. */
static int read_record(csv *c, record *r, const char *path, char **err)
{
    record_clear(r);
    /* Blank lines are no records. */
    while (c->p < c->end && at_eol(c))
        skip_eol(c);
    if (c->p >= c->end)
        return 0;
    int rec_line = c->line;
    for (;;) {
        ckube__strbuf b = {0};
        if (c->p < c->end && *c->p == '"') {
            next(c);
            for (;;) {
                int ch = next(c);
                if (ch < 0) {
                    free(b.s);
                    int line, col;
                    eof_position(c, &line, &col);
                    parse_error(err, path, rec_line, line, col,
                                "extraneous or missing \" in quoted-field");
                    return -1;
                }
                if (ch == '"') {
                    if (c->p < c->end && *c->p == '"') {
                        next(c);
                        ckube__sb_addc(&b, '"');
                        continue;
                    }
                    break;
                }
                if (ch == '\r' && c->p < c->end && *c->p == '\n')
                    continue; /* CRLF inside quotes reads as LF */
                ckube__sb_addc(&b, (char)ch);
            }
            if (!(at_eol(c) || *c->p == ',')) {
                free(b.s);
                /* Go names the column of the closing quote. */
                parse_error(err, path, rec_line, c->line, c->col - 1,
                            "extraneous or missing \" in quoted-field");
                return -1;
            }
        } else {
            while (!at_eol(c) && *c->p != ',') {
                if (*c->p == '"') {
                    free(b.s);
                    parse_error(err, path, rec_line, c->line, c->col,
                                "bare \" in non-quoted-field");
                    return -1;
                }
                ckube__sb_addc(&b, (char)next(c));
            }
        }
        record_add(r, &b);
        if (c->p < c->end && *c->p == ',') {
            next(c);
            continue;
        }
        skip_eol(c);
        return 1;
    }
}

static int by_token(const void *a, const void *b)
{
    return strcmp(((const entry *)a)->token, ((const entry *)b)->token);
}

/* Splits "a,b,c" as Go's strings.Split (an empty string is one empty
 * group, as upstream's). */
static void add_groups(auth_user *u, const char *s)
{
    for (;;) {
        const char *comma = strchr(s, ',');
        size_t len = comma ? (size_t)(comma - s) : strlen(s);
        char *g = xstrndup(s, len);
        auth_user_add_group(u, g);
        free(g);
        if (!comma)
            return;
        s = comma + 1;
    }
}

/* An entry and where its record was, to sort by token then position. */
typedef struct tagged {
    entry e;
    size_t pos;
} tagged;

static int by_token_then_pos(const void *a, const void *b)
{
    const tagged *x = a, *y = b;
    int c = strcmp(x->e.token, y->e.token);
    return c ? c : (x->pos > y->pos) - (x->pos < y->pos);
}

/* Sorts t's entries by token for lookups; of a token given twice the
 * later record's user stays, as upstream's map assignment. */
static void dedup_sort(tokenfile *t, const char *path)
{
    size_t n = t->n;
    tagged *tg = xmalloc((n ? n : 1) * sizeof *tg);
    for (size_t i = 0; i < n; i++)
        tg[i] = (tagged){t->e[i], i};
    qsort(tg, n, sizeof *tg, by_token_then_pos);
    size_t out = 0;
    for (size_t i = 0; i < n; i++) {
        if (i + 1 < n && !strcmp(tg[i].e.token, tg[i + 1].e.token)) {
            CKUBE_WARN("duplicate token has been found in token file '%s', record number '%zu'",
                       path, tg[i + 1].e.recno);
            free(tg[i].e.token);
            auth_user_unref(tg[i].e.user);
            continue;
        }
        t->e[out++] = tg[i].e;
    }
    free(tg);
    t->n = out;
}

tokenfile *tokenfile_parse(const char *path, const char *data, size_t len, char **err)
{
    tokenfile *t = xcalloc(1, sizeof *t);
    csv c = {data, data + len, 1, 1, data};
    record r = {0};
    size_t cap = 0, recno = 0;
    int rc;
    while ((rc = read_record(&c, &r, path, err)) == 1) {
        if (r.n < 3) {
            ckube__set_err(err,
                           "token file '%s' must have at least 3 columns (token, user name, user "
                           "uid), found %zu",
                           path, r.n);
            rc = -1;
            break;
        }
        recno++;
        if (!*r.f[0]) {
            CKUBE_WARN("empty token has been found in token file '%s', record number '%zu'", path,
                       recno);
            continue;
        }
        auth_user *u = auth_user_new(r.f[1], r.f[2], NULL, 0, NULL);
        if (r.n >= 4)
            add_groups(u, r.f[3]);
        if (t->n == cap) {
            cap = cap ? 2 * cap : 16;
            t->e = xrealloc(t->e, cap * sizeof *t->e);
        }
        t->e[t->n++] = (entry){xstrdup(r.f[0]), u, recno};
    }
    record_clear(&r);
    free(r.f);
    if (rc < 0) {
        tokenfile_free(t);
        return NULL;
    }
    dedup_sort(t, path);
    return t;
}

tokenfile *tokenfile_load(const char *path, char **err)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        ckube__set_err(err, "open %s: %s", path, strerror(errno));
        return NULL;
    }
    ckube__strbuf b = {0};
    char buf[8192];
    size_t got;
    while ((got = fread(buf, 1, sizeof buf, f)) > 0) {
        if (b.len + got > MAX_FILE) {
            fclose(f);
            free(b.s);
            ckube__set_err(err, "token file '%s' is over %u bytes", path, MAX_FILE);
            return NULL;
        }
        ckube__sb_addn(&b, buf, got);
    }
    bool bad = ferror(f);
    fclose(f);
    if (bad) {
        free(b.s);
        ckube__set_err(err, "read %s: %s", path, strerror(errno));
        return NULL;
    }
    tokenfile *t = tokenfile_parse(path, b.s ? b.s : "", b.len, err);
    free(b.s);
    return t;
}

auth_user *tokenfile_lookup(const tokenfile *t, const char *token)
{
    if (!t || !token || !t->n)
        return NULL; /* (bsearch must not be given the NULL of an empty table) */
    entry key = {(char *)token, NULL, 0};
    entry *e = bsearch(&key, t->e, t->n, sizeof *t->e, by_token);
    return e ? auth_user_ref(e->user) : NULL;
}

size_t tokenfile_count(const tokenfile *t)
{
    return t ? t->n : 0;
}

void tokenfile_free(tokenfile *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->n; i++) {
        free(t->e[i].token);
        auth_user_unref(t->e[i].user);
    }
    free(t->e);
    free(t);
}
