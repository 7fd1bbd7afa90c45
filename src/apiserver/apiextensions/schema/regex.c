/* The schema engine (internal.h): ECMA-262 patterns translated to POSIX, and Go regexp syntax
 * errors. */
#include "apiserver/apiextensions/schema/internal.h"
#include "common/xalloc.h"

static bool is_class_escape(char c)
{
    return c == 'd' || c == 'D' || c == 'w' || c == 'W' || c == 's' || c == 'S';
}

static const char *class_body(char c)
{
    switch (c) {
    case 'd':
    case 'D':
        return "0-9";
    case 'w':
    case 'W':
        return "A-Za-z0-9_";
    default:
        return "[:space:]";
    }
}

static int escape_char(char c)
{
    switch (c) {
    case 'n':
        return '\n';
    case 't':
        return '\t';
    case 'r':
        return '\r';
    case 'f':
        return '\f';
    case 'v':
        return '\v';
    case '0':
        return -1; /* NUL cannot be expressed */
    default:
        if (isalnum((unsigned char)c))
            return -1; /* \b, \B, \uXXXX, \cX, backrefs: unsupported */
        return (unsigned char)c;
    }
}

/* Converts a bracket expression starting at p ('[') into POSIX form.
 * Returns the position after ']' or NULL if unsupported. */
static const char *convert_bracket(const char *p, ckube__strbuf *out)
{
    p++; /* '[' */
    bool neg = false;
    if (*p == '^') {
        neg = true;
        p++;
    }
    bool has_rbracket = false, has_dash = false, has_caret = false;
    ckube__strbuf body = {0};
    bool first = true;
    while (*p && (*p != ']' || first)) {
        first = false;
        int c;
        if (*p == '\\') {
            if (!p[1])
                goto fail;
            if (is_class_escape(p[1])) {
                if (isupper((unsigned char)p[1]))
                    goto fail; /* negated class inside brackets */
                ckube__sb_add(&body, class_body(p[1]));
                p += 2;
                continue;
            }
            c = escape_char(p[1]);
            if (c < 0)
                goto fail;
            p += 2;
        } else if (*p == '[' && p[1] == ':') {
            const char *end = strstr(p, ":]");
            if (!end)
                goto fail;
            ckube__sb_addn(&body, p, (size_t)(end + 2 - p));
            p = end + 2;
            continue;
        } else {
            c = (unsigned char)*p++;
        }
        /* a range? */
        if (*p == '-' && p[1] && p[1] != ']') {
            int hi;
            if (p[1] == '\\') {
                if (!p[2] || is_class_escape(p[2]))
                    goto fail;
                hi = escape_char(p[2]);
                if (hi < 0)
                    goto fail;
                p += 3;
            } else {
                hi = (unsigned char)p[1];
                p += 2;
            }
            if (hi < c)
                goto fail;
            if (c == ']' || c == '-' || c == '^' || hi == ']' || hi == '-' || hi == '^')
                goto fail;
            ckube__sb_addc(&body, (char)c);
            ckube__sb_addc(&body, '-');
            ckube__sb_addc(&body, (char)hi);
            continue;
        }
        if (c == ']')
            has_rbracket = true;
        else if (c == '-')
            has_dash = true;
        else if (c == '^')
            has_caret = true;
        else
            ckube__sb_addc(&body, (char)c);
    }
    if (*p != ']')
        goto fail;
    p++;
    if (!body.len && !has_rbracket && !has_dash && !has_caret) {
        /* [] matches nothing, [^] anything */
        ckube__sb_add(out, neg ? "(.|\n)" : "[^\\x00-\\xff]");
        free(body.s);
        return p;
    }
    ckube__sb_addc(out, '[');
    if (neg)
        ckube__sb_addc(out, '^');
    if (has_rbracket)
        ckube__sb_addc(out, ']');
    if (body.s)
        ckube__sb_add(out, body.s);
    if (has_caret)
        ckube__sb_addc(out, '^');
    if (has_dash)
        ckube__sb_addc(out, '-');
    ckube__sb_addc(out, ']');
    free(body.s);
    return p;
fail:
    free(body.s);
    return NULL;
}

/* Guards against patterns that would make regcomp blow up. glibc
 * compiles a{n,m} by copying a's tree m times (and a+ by copying it
 * once), so nested repetitions multiply: ((a{1000}){1000}) is a million
 * nodes, and a+++... doubles per '+'. Go's regexp, which upstream
 * compiles patterns with, refuses such patterns outright (invalid repeat
 * count over 1000, invalid nested repetition operator, expression too
 * large); here they are not enforced, like any pattern POSIX cannot
 * express. `weight` estimates the compiled tree's nodes. */
#define RE_MAX_REPEAT 1000

#define RE_MAX_WEIGHT 20000

#define RE_MAX_GROUPS 64

typedef struct re_size {
    double cur[RE_MAX_GROUPS + 1]; /* weight of each open group so far */
    int depth;
    double last; /* weight of the last atom or group (what a quantifier repeats) */
} re_size;

static void re_atom(re_size *z, double w)
{
    z->last = w;
    z->cur[z->depth] += w;
}

/* A quantifier on the last atom that makes `copies` of it in all. */
static bool re_repeat(re_size *z, double copies)
{
    z->cur[z->depth] += z->last * (copies - 1);
    z->last *= copies;
    return z->cur[z->depth] <= RE_MAX_WEIGHT;
}

/* Parses a counted repetition at p ("{n}", "{n,}", "{n,m}"); sets *end
 * past it, and *min and *max (-1: unbounded). False when p is not one (Go
 * then reads the '{' as a literal). */
static bool re2_counted(const char *p, const char **end, long *min, long *max)
{
    const char *q = p + 1;
    if (!isdigit((unsigned char)*q))
        return false;
    *min = 0;
    for (; isdigit((unsigned char)*q); q++)
        *min = *min > 100000 ? *min : *min * 10 + (*q - '0');
    *max = *min;
    if (*q == ',') {
        q++;
        if (*q == '}') {
            *max = -1;
        } else {
            if (!isdigit((unsigned char)*q))
                return false;
            *max = 0;
            for (; isdigit((unsigned char)*q); q++)
                *max = *max > 100000 ? *max : *max * 10 + (*q - '0');
        }
    }
    if (*q != '}')
        return false;
    *end = q + 1;
    return true;
}

/* Go's limits on counts: each at most 1000, and min <= max. */
static bool re2_counts_ok(long min, long max)
{
    return min <= RE_MAX_REPEAT && max <= RE_MAX_REPEAT && (max < 0 || min <= max);
}

/* The copies glibc makes for the counted repetition at p ({n}, {n,} or
 * {n,m}); 0 when it is not one (e.g. {,m}), a count is over
 * RE_MAX_REPEAT or m < n. */
static double brace_copies(const char *p)
{
    const char *end;
    long min, max;
    if (!re2_counted(p, &end, &min, &max) || !re2_counts_ok(min, max))
        return 0;
    return max < 0 ? (double)min + 1 : max ? (double)max : 1;
}

char *schema_ecma_to_posix(const char *pattern)
{
    ckube__strbuf out = {0};
    const char *p = pattern;
    bool prev_quant = false;
    re_size z = {0};
    ckube__sb_add(&out, "");
    while (*p) {
        if (z.cur[z.depth] > RE_MAX_WEIGHT)
            goto fail;
        char c = *p;
        if (c == '\\') {
            if (!p[1])
                goto fail;
            if (is_class_escape(p[1])) {
                ckube__sb_addc(&out, '[');
                if (isupper((unsigned char)p[1]))
                    ckube__sb_addc(&out, '^');
                ckube__sb_add(&out, class_body(p[1]));
                ckube__sb_addc(&out, ']');
            } else {
                int e = escape_char(p[1]);
                if (e < 0)
                    goto fail;
                if (strchr(".[]{}()*+?^$|\\", e)) {
                    ckube__sb_addc(&out, '\\');
                    ckube__sb_addc(&out, (char)e);
                } else {
                    ckube__sb_addc(&out, (char)e);
                }
            }
            p += 2;
            prev_quant = false;
            re_atom(&z, 1);
            continue;
        }
        if (c == '[') {
            p = convert_bracket(p, &out);
            if (!p)
                goto fail;
            prev_quant = false;
            re_atom(&z, 1);
            continue;
        }
        if (c == '(' && p[1] == '?' && p[2] != ':')
            goto fail; /* lookaround, flags, named groups */
        if (c == '(') {
            if (z.depth == RE_MAX_GROUPS)
                goto fail;
            z.cur[++z.depth] = 0;
            ckube__sb_addc(&out, '(');
            p += p[1] == '?' ? 3 : 1;
            prev_quant = false;
            continue;
        }
        if (c == ')') {
            if (z.depth == 0)
                goto fail;
            double group = z.cur[z.depth--];
            re_atom(&z, group);
            ckube__sb_addc(&out, ')');
            p++;
            prev_quant = false;
            continue;
        }
        if (c == '?' && prev_quant) {
            /* lazy quantifier: same set of matching strings */
            p++;
            prev_quant = false;
            continue;
        }
        if (c == '{') {
            const char *end = strchr(p, '}');
            bool ok = end != NULL && end > p + 1;
            for (const char *q = p + 1; ok && q < end; q++)
                if (!isdigit((unsigned char)*q) && *q != ',')
                    ok = false;
            if (!ok) {
                ckube__sb_add(&out, "\\{"); /* literal brace, as ECMA allows */
                p++;
                prev_quant = false;
                re_atom(&z, 1);
                continue;
            }
            double copies = brace_copies(p);
            if (prev_quant || copies == 0 || !re_repeat(&z, copies))
                goto fail; /* nested repetition, or too many copies */
            ckube__sb_addn(&out, p, (size_t)(end + 1 - p));
            p = end + 1;
            prev_quant = true;
            continue;
        }
        if (c == '}') {
            ckube__sb_add(&out, "\\}");
            p++;
            prev_quant = false;
            re_atom(&z, 1);
            continue;
        }
        bool quant = c == '*' || c == '+' || c == '?';
        if (quant && prev_quant)
            goto fail; /* a** or a+*: Go's "invalid nested repetition operator" */
        if (quant && !re_repeat(&z, c == '+' ? 2 : 1))
            goto fail;
        if (!quant && c != '|' && c != '^' && c != '$')
            re_atom(&z, 1);
        ckube__sb_addc(&out, c);
        prev_quant = quant;
        p++;
    }
    return ckube__sb_take(&out);
fail:
    free(out.s);
    return NULL;
}

static char *re2_err(const char *code, const char *expr, size_t n)
{
    ckube__strbuf b = {0};
    ckube__sb_printf(&b, "error parsing regexp: %s: `%.*s`", code, (int)n, expr);
    return ckube__sb_take(&b);
}

/* The end of the character class that starts at p ('['), or NULL when it
 * has no closing ']' (a ']' right after "[" or "[^" is a literal). */
static const char *re2_class_end(const char *p)
{
    const char *q = p + 1;
    if (*q == '^')
        q++;
    if (*q == ']')
        q++;
    for (; *q && *q != ']'; q++) {
        if (*q == '\\' && q[1])
            q++;
        else if (*q == '[' && q[1] == ':') {
            const char *close = strstr(q + 2, ":]");
            if (close)
                q = close + 1;
        }
    }
    return *q == ']' ? q : NULL;
}

char *schema_re2_error(const char *pattern)
{
    const char *p = pattern;
    int depth = 0;
    bool atom = false;              /* something repeatable precedes */
    const char *last_repeat = NULL; /* start of the repetition just before */
    while (*p) {
        const char *start = p;
        char c = *p;
        bool repeat = false;
        if (c == '\\') {
            if (!p[1])
                return re2_err("trailing backslash at end of expression", "", 0);
            /* \1-\9 alone would be a backreference, which RE2 lacks;
             * with more octal digits it is an octal escape */
            if (p[1] >= '1' && p[1] <= '9' && !(p[2] >= '0' && p[2] <= '7'))
                return re2_err("invalid escape sequence", p, 2);
            p += 2;
            atom = true;
        } else if (c == '[') {
            const char *end = re2_class_end(p);
            if (!end)
                return re2_err("missing closing ]", p, strlen(p));
            p = end + 1;
            atom = true;
        } else if (c == '(') {
            if (p[1] == '?' && (p[2] == '=' || p[2] == '!'))
                return re2_err("invalid or unsupported Perl syntax", p, 3);
            if (p[1] == '?') {
                /* (?P<name> and (?<name> open a group, (?flags: too;
                 * (?flags) opens none. Anything else is left alone. */
                const char *q = p + 2;
                if (*q == 'P' || *q == '<') {
                    q += *q == 'P';
                    if (*q != '<' || q[1] == '=' || q[1] == '!' || !(q = strchr(q, '>')))
                        return NULL;
                    p = q + 1;
                    depth++;
                    atom = false;
                    last_repeat = NULL;
                    continue;
                }
                while (isalpha((unsigned char)*q) || *q == '-')
                    q++;
                if (*q == ')') {
                    p = q + 1; /* flags for what follows: nothing to repeat yet */
                    last_repeat = NULL;
                    continue;
                }
                if (*q != ':')
                    return NULL;
                p = q + 1;
            } else {
                p++;
            }
            depth++;
            atom = false;
        } else if (c == ')') {
            if (depth == 0)
                return re2_err("unexpected )", pattern, strlen(pattern));
            depth--;
            p++;
            atom = true;
        } else if (c == '|') {
            p++;
            atom = false;
        } else if (c == '*' || c == '+' || c == '?' || c == '{') {
            const char *end = p + 1;
            long min = 0, max = 0;
            if (c == '{' && !re2_counted(p, &end, &min, &max)) {
                p++; /* a literal '{' */
                atom = true;
                last_repeat = NULL;
                continue;
            }
            if (c == '{' && !re2_counts_ok(min, max))
                return re2_err("invalid repeat count", p, (size_t)(end - p));
            if (*end == '?')
                end++; /* non-greedy */
            if (last_repeat)
                return re2_err("invalid nested repetition operator", last_repeat,
                               (size_t)(end - last_repeat));
            if (!atom)
                return re2_err("missing argument to repetition operator", p, (size_t)(end - p));
            p = end;
            repeat = true;
        } else {
            p++;
            atom = true;
        }
        last_repeat = repeat ? start : NULL;
    }
    if (depth > 0)
        return re2_err("missing closing )", pattern, strlen(pattern));
    return NULL;
}

/* A small cache of compiled patterns: CRD schemas repeat the same few. */
#define RE_CACHE_SIZE 64

typedef struct re_entry {
    char *pattern;
    regex_t re;
    bool ok;
} re_entry;

static re_entry re_cache[RE_CACHE_SIZE];

static size_t re_next;

static pthread_mutex_t re_lock = PTHREAD_MUTEX_INITIALIZER;

int sch_pattern_match(const char *pattern, const char *s)
{
    pthread_mutex_lock(&re_lock);
    re_entry *e = NULL;
    for (size_t i = 0; i < RE_CACHE_SIZE; i++)
        if (re_cache[i].pattern && !strcmp(re_cache[i].pattern, pattern)) {
            e = &re_cache[i];
            break;
        }
    if (!e) {
        e = &re_cache[re_next];
        re_next = (re_next + 1) % RE_CACHE_SIZE;
        if (e->pattern) {
            if (e->ok)
                regfree(&e->re);
            free(e->pattern);
        }
        e->pattern = xstrdup(pattern);
        e->ok = false;
        char *posix = schema_ecma_to_posix(pattern);
        if (posix && e->pattern)
            e->ok = regcomp(&e->re, posix, REG_EXTENDED | REG_NOSUB) == 0;
        free(posix);
        if (!e->pattern) {
            pthread_mutex_unlock(&re_lock);
            return -1;
        }
    }
    int r = -1;
    if (e->ok)
        r = regexec(&e->re, s, 0, NULL, 0) == 0 ? 1 : 0;
    pthread_mutex_unlock(&re_lock);
    return r;
}
