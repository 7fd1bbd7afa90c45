/* The static token file (apiserver/authentication/tokenfile.h): CSV as
 * Go's encoding/csv reads it, the records kube-apiserver's tokenfile
 * takes, and the errors it gives.
 *
 * Every in-memory input is handed over in a buffer of exactly its length
 * (no terminating NUL), so a read past the end shows under ASan. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "apiserver/authentication/tokenfile.h"

#define PATH "/etc/ckube/tokens.csv" /* names the input in messages */
#define MAX_FILE (16u << 20)         /* tokenfile.c's limit on a file's size */

static char dir[512]; /* a temporary directory for the file tests */

static int group_setup(void **state)
{
    (void)state;
    const char *tmp = getenv("CKUBE_TEST_TMP");
    if (!tmp || !*tmp)
        tmp = "/tmp";
    mkdir(tmp, 0755);
    snprintf(dir, sizeof dir, "%s/tokenfile-XXXXXX", tmp);
    return mkdtemp(dir) ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    rmdir(dir);
    return 0;
}

/* Parses the first n bytes of s from a buffer of exactly n bytes. */
static tokenfile *parse_n(const char *s, size_t n, char **err)
{
    char *buf = malloc(n ? n : 1);
    assert_non_null(buf);
    memcpy(buf, s, n);
    tokenfile *t = tokenfile_parse(PATH, buf, n, err);
    free(buf);
    return t;
}

/* Parses s, which must parse. */
static tokenfile *parse_ok(const char *s)
{
    char *err = NULL;
    tokenfile *t = parse_n(s, strlen(s), &err);
    if (!t)
        fail_msg("parse of \"%s\" failed: %s", s, err ? err : "(no message)");
    assert_null(err);
    return t;
}

/* Parses s, which must fail; returns the message (the caller frees). */
static char *parse_err(const char *s)
{
    char *err = NULL;
    tokenfile *t = parse_n(s, strlen(s), &err);
    if (t)
        fail_msg("parse of \"%s\" succeeded (%zu tokens)", s, tokenfile_count(t));
    assert_non_null(err);
    return err;
}

static void expect_parse_err(const char *s, const char *words)
{
    char *err = parse_err(s);
    if (!strstr(err, words))
        fail_msg("error \"%s\" lacks \"%s\"", err, words);
    free(err);
}

/* Checks that `token` is the user name/uid in exactly the groups given
 * (NULL-terminated; none: pass NULL first). */
static void expect_user(const tokenfile *t, const char *token, const char *name, const char *uid,
                        ...)
{
    auth_user *u = tokenfile_lookup(t, token);
    if (!u)
        fail_msg("token \"%s\" not found", token);
    assert_string_equal(u->name, name);
    assert_string_equal(u->uid, uid);
    va_list ap;
    va_start(ap, uid);
    size_t n = 0;
    for (const char *g; (g = va_arg(ap, const char *)); n++) {
        if (n >= u->ngroups)
            fail_msg("token \"%s\": group %zu (\"%s\") missing", token, n, g);
        assert_string_equal(u->groups[n], g);
    }
    va_end(ap);
    assert_int_equal(u->ngroups, n);
    assert_null(u->extra);
    auth_user_unref(u);
}

static void expect_absent(const tokenfile *t, const char *token)
{
    auth_user *u = tokenfile_lookup(t, token);
    if (u)
        fail_msg("token \"%s\" found (user \"%s\")", token, u->name);
}

/* ---- stderr capture, for the warnings -------------------------------- */

static int saved_stderr = -1;
static FILE *captured;

static void capture_start(void)
{
    fflush(stderr);
    captured = tmpfile();
    assert_non_null(captured);
    saved_stderr = dup(STDERR_FILENO);
    assert_true(saved_stderr >= 0);
    assert_true(dup2(fileno(captured), STDERR_FILENO) >= 0);
}

/* What was written to stderr since capture_start (the caller frees). */
static char *capture_end(void)
{
    fflush(stderr);
    dup2(saved_stderr, STDERR_FILENO);
    close(saved_stderr);
    saved_stderr = -1;
    long n = ftell(captured);
    assert_true(n >= 0);
    char *s = calloc(1, (size_t)n + 1);
    rewind(captured);
    size_t got = fread(s, 1, (size_t)n, captured);
    s[got] = '\0';
    fclose(captured);
    captured = NULL;
    return s;
}

static size_t count_of(const char *hay, const char *needle)
{
    size_t n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

/* ---- records ---------------------------------------------------------- */

static void test_basic_records(void **state)
{
    (void)state;
    tokenfile *t = parse_ok("tok1,alice,uid-1\ntok2,bob,uid-2\n");
    assert_int_equal(tokenfile_count(t), 2);
    expect_user(t, "tok1", "alice", "uid-1", NULL);
    expect_user(t, "tok2", "bob", "uid-2", NULL);
    tokenfile_free(t);
}

static void test_last_line_without_newline(void **state)
{
    (void)state;
    tokenfile *t = parse_ok("tok1,alice,uid-1\ntok2,bob,uid-2");
    assert_int_equal(tokenfile_count(t), 2);
    expect_user(t, "tok2", "bob", "uid-2", NULL);
    tokenfile_free(t);
}

static void test_empty_inputs(void **state)
{
    (void)state;
    static const char *const inputs[] = {"", "\n", "\n\n\n", "\r\n", "\r", "\r\n\r\n\n"};
    for (size_t i = 0; i < sizeof inputs / sizeof *inputs; i++) {
        tokenfile *t = parse_ok(inputs[i]);
        assert_int_equal(tokenfile_count(t), 0);
        expect_absent(t, "");
        expect_absent(t, "x");
        tokenfile_free(t);
    }
}

static void test_empty_uid_and_name(void **state)
{
    (void)state;
    /* Upstream takes any three columns: an empty name or uid is kept. */
    tokenfile *t = parse_ok("t1,alice,\nt2,,uid\nt3,,\n");
    assert_int_equal(tokenfile_count(t), 3);
    expect_user(t, "t1", "alice", "", NULL);
    expect_user(t, "t2", "", "uid", NULL);
    expect_user(t, "t3", "", "", NULL);
    tokenfile_free(t);
}

static void test_whitespace_is_data(void **state)
{
    (void)state;
    /* Go's csv keeps the spaces of a field (TrimLeadingSpace is off). */
    tokenfile *t = parse_ok(" tok , alice ,uid \n");
    expect_user(t, " tok ", " alice ", "uid ", NULL);
    expect_absent(t, "tok");
    tokenfile_free(t);
}

static void test_groups_column(void **state)
{
    (void)state;
    tokenfile *t = parse_ok("t1,alice,1,\"system:masters,dev,ops\"\n"
                            "t2,bob,2,single\n"
                            "t3,carol,3,\"\"\n"
                            "t4,dave,4,\n"
                            "t5,erin,5\n"
                            "t6,frank,6,\"a,,b\"\n"
                            "t7,grace,7,\",x\"\n");
    expect_user(t, "t1", "alice", "1", "system:masters", "dev", "ops", NULL);
    expect_user(t, "t2", "bob", "2", "single", NULL);
    /* strings.Split("", ",") is [""]: one empty group, as upstream. */
    expect_user(t, "t3", "carol", "3", "", NULL);
    expect_user(t, "t4", "dave", "4", "", NULL);
    /* No fourth column: no groups at all. */
    expect_user(t, "t5", "erin", "5", NULL);
    expect_user(t, "t6", "frank", "6", "a", "", "b", NULL);
    expect_user(t, "t7", "grace", "7", "", "x", NULL);
    tokenfile_free(t);
}

static void test_columns_past_the_fourth_ignored(void **state)
{
    (void)state;
    /* Only record[3] is groups; an unquoted "g1,g2" is two columns. */
    tokenfile *t = parse_ok("t1,alice,1,g1,g2,g3\nt2,bob,2,\"g1,g2\",ignored,\"also\"\n");
    expect_user(t, "t1", "alice", "1", "g1", NULL);
    expect_user(t, "t2", "bob", "2", "g1", "g2", NULL);
    tokenfile_free(t);
}

static void test_quoted_fields(void **state)
{
    (void)state;
    tokenfile *t = parse_ok("\"tok,1\",\"al\"\"ice\",\"u,i\"\"d\"\"\"\n"
                            "\"\"\"quoted\"\"\",\"\",\"\"\n"
                            "\"plain\",bob,\"x\"\n");
    expect_user(t, "tok,1", "al\"ice", "u,i\"d\"", NULL);
    expect_user(t, "\"quoted\"", "", "", NULL);
    expect_user(t, "plain", "bob", "x", NULL);
    expect_absent(t, "tok");
    tokenfile_free(t);
}

static void test_quoted_field_spanning_lines(void **state)
{
    (void)state;
    tokenfile *t = parse_ok("tok1,\"multi\nline\nname\",uid1,\"g1,\ng2\"\n"
                            "tok2,bob,uid2\n");
    assert_int_equal(tokenfile_count(t), 2);
    expect_user(t, "tok1", "multi\nline\nname", "uid1", "g1", "\ng2", NULL);
    expect_user(t, "tok2", "bob", "uid2", NULL);
    tokenfile_free(t);

    /* A blank line inside quotes is data, not a record separator. */
    t = parse_ok("tok1,\"a\n\n\nb\",uid\n");
    expect_user(t, "tok1", "a\n\n\nb", "uid", NULL);
    tokenfile_free(t);

    /* CRLF inside quotes reads as LF, as Go normalizes each line. */
    t = parse_ok("tok1,\"a\r\nb\",uid\r\n");
    expect_user(t, "tok1", "a\nb", "uid", NULL);
    tokenfile_free(t);
}

static void test_crlf_file(void **state)
{
    (void)state;
    tokenfile *t =
        parse_ok("tok1,alice,uid1\r\ntok2,bob,uid2,\"g1,g2\"\r\n\r\ntok3,carol,uid3\r\n");
    assert_int_equal(tokenfile_count(t), 3);
    expect_user(t, "tok1", "alice", "uid1", NULL);
    expect_user(t, "tok2", "bob", "uid2", "g1", "g2", NULL);
    expect_user(t, "tok3", "carol", "uid3", NULL);
    tokenfile_free(t);

    /* A CR just before the end of input is dropped too (as Go). */
    t = parse_ok("tok1,alice,uid1\r");
    expect_user(t, "tok1", "alice", "uid1", NULL);
    tokenfile_free(t);
    t = parse_ok("tok1,alice,\"uid1\"\r");
    expect_user(t, "tok1", "alice", "uid1", NULL);
    tokenfile_free(t);
}

static void test_lone_cr_is_data(void **state)
{
    (void)state;
    /* Only CR LF (or CR at the very end) ends a line: another CR is a
     * byte of the field, as in Go. */
    tokenfile *t = parse_ok("tok1,al\rice,uid\r\r\ntok2,bob,\"u\rid\"\n");
    expect_user(t, "tok1", "al\rice", "uid\r", NULL);
    expect_user(t, "tok2", "bob", "u\rid", NULL);
    tokenfile_free(t);
}

static void test_blank_lines_skipped(void **state)
{
    (void)state;
    tokenfile *t = parse_ok("\n\ntok1,alice,uid1\n\n\n\ntok2,bob,uid2\n\n");
    assert_int_equal(tokenfile_count(t), 2);
    expect_user(t, "tok1", "alice", "uid1", NULL);
    expect_user(t, "tok2", "bob", "uid2", NULL);
    tokenfile_free(t);
}

static void test_whitespace_line_is_not_blank(void **state)
{
    (void)state;
    /* " " is a record of one field, not a blank line. */
    expect_parse_err("tok1,alice,uid1\n \n",
                     "token file '" PATH "' must have at least 3 columns (token, user name, "
                     "user uid), found 1");
}

static void test_utf8(void **state)
{
    (void)state;
    tokenfile *t = parse_ok("tök€n,jöhn,ü1,\"grüppe,组\"\n");
    expect_user(t, "tök€n", "jöhn", "ü1", "grüppe", "组", NULL);
    tokenfile_free(t);
}

/* ---- errors ----------------------------------------------------------- */

static void test_fewer_than_three_columns(void **state)
{
    (void)state;
    char *err = parse_err("tok1,alice\n");
    assert_string_equal(err, "token file '" PATH "' must have at least 3 columns (token, user "
                             "name, user uid), found 2");
    free(err);
    err = parse_err("tok1,alice,uid1\njust-a-token\ntok3,carol,uid3\n");
    assert_string_equal(err, "token file '" PATH "' must have at least 3 columns (token, user "
                             "name, user uid), found 1");
    free(err);
    /* The column count is checked before the empty token is skipped. */
    err = parse_err(",alice\n");
    assert_string_equal(err, "token file '" PATH "' must have at least 3 columns (token, user "
                             "name, user uid), found 2");
    free(err);
    /* A quoted comma is no column. */
    expect_parse_err("tok1,\"alice,uid1\"\n", "found 2");
}

static void test_bare_quote(void **state)
{
    (void)state;
    /* Go: parse error on line 1, column 4: bare " in non-quoted-field */
    expect_parse_err("a,b\"c,d\n", "line 1, column 4: bare \" in non-quoted-field");
    expect_parse_err("a,b,c\"\n", "bare \" in non-quoted-field");
    expect_parse_err("a,b,c\nd,e,f\ntok\"en,x,y\n",
                     "line 3, column 4: bare \" in non-quoted-field");
    /* After a good record: nothing is returned, not a partial table. */
    char *err = parse_err("tok1,alice,uid1\nx,y\"z,w\n");
    assert_non_null(strstr(err, PATH));
    free(err);
}

static void test_text_after_closing_quote(void **state)
{
    (void)state;
    expect_parse_err("\"tok\"x,alice,uid\n", "extraneous or missing \" in quoted-field");
    expect_parse_err("tok,\"alice\" ,uid\n", "extraneous or missing \" in quoted-field");
    expect_parse_err("tok,alice,\"uid\"\"\n", "extraneous or missing \" in quoted-field");
    /* A CR not followed by LF after a closing quote is text, too. */
    expect_parse_err("tok,alice,\"uid\"\rx\n", "extraneous or missing \" in quoted-field");
}

static void test_unterminated_quote(void **state)
{
    (void)state;
    expect_parse_err("tok,alice,\"uid\n", "extraneous or missing \" in quoted-field");
    expect_parse_err("tok,alice,\"uid", "extraneous or missing \" in quoted-field");
    expect_parse_err("\"", "extraneous or missing \" in quoted-field");
    expect_parse_err("tok1,alice,uid1\ntok2,bob,\"uid2\ntok3,carol,uid3\n",
                     "extraneous or missing \" in quoted-field");
    /* The message names the file and the record's first line. */
    char *err = parse_err("a,b,c\n\ntok,\"x\ny\n");
    assert_non_null(strstr(err, "'" PATH "'"));
    assert_non_null(strstr(err, "record on line 3"));
    free(err);
}

/* The parse errors in Go's words and positions (csv.ParseError: the
 * record's first line only when the error is on another; columns are
 * 1-based bytes, a quoted field that never ends reported just past the
 * last line), after the file's name. Each as Go 1.19's reader gave. */
static void test_error_positions_as_go(void **state)
{
    (void)state;
    static const struct {
        const char *in, *err;
    } cases[] = {
        {"\"tok\"x,alice,uid\n", "parse error on line 1, column 5: extraneous or missing \" in "
                                 "quoted-field"},
        {"tok,alice,\"uid\n", "parse error on line 1, column 16: extraneous or missing \" in "
                              "quoted-field"},
        {"a,b,c\n\ntok,\"x\ny\n", "record on line 3; parse error on line 4, column 3: "
                                  "extraneous or missing \" in quoted-field"},
        {"tok,alice,\"uid\r\n\r\n", "record on line 1; parse error on line 2, column 2: "
                                    "extraneous or missing \" in quoted-field"},
        {"a,b\"c,d\n", "parse error on line 1, column 4: bare \" in non-quoted-field"},
        {"tok,\"x\n\r", "parse error on line 1, column 8: extraneous or missing \" in "
                        "quoted-field"},
        {"tok,\"al\nice\"x,uid\n", "record on line 1; parse error on line 2, column 4: "
                                   "extraneous or missing \" in quoted-field"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *err = parse_err(cases[i].in);
        char want[300];
        snprintf(want, sizeof want, "token file '%s': %s", PATH, cases[i].err);
        assert_string_equal(err, want);
        free(err);
    }
}

static void test_errors_from_a_prefix_only(void **state)
{
    (void)state;
    /* Only `len` bytes are read: what follows them is not the file's. */
    const char *s = "tok1,alice,uid1\ntok2,bob,\"unterminated";
    char *err = NULL;
    tokenfile *t = parse_n(s, 16, &err);
    assert_non_null(t);
    assert_null(err);
    assert_int_equal(tokenfile_count(t), 1);
    expect_user(t, "tok1", "alice", "uid1", NULL);
    tokenfile_free(t);
    t = parse_n(s, 15, &err); /* without the newline */
    assert_non_null(t);
    expect_user(t, "tok1", "alice", "uid1", NULL);
    tokenfile_free(t);
    t = parse_n(s, 14, &err);
    assert_non_null(t);
    expect_user(t, "tok1", "alice", "uid", NULL);
    tokenfile_free(t);
}

/* ---- empty and duplicate tokens --------------------------------------- */

static void test_empty_token_skipped(void **state)
{
    (void)state;
    capture_start();
    tokenfile *t = parse_ok(",nobody,uid0\ntok1,alice,uid1\n\"\",nobody2,uid2,g\n");
    char *log = capture_end();
    assert_int_equal(tokenfile_count(t), 1);
    expect_user(t, "tok1", "alice", "uid1", NULL);
    expect_absent(t, "");
    /* The warnings name the file and the record numbers (1-based,
     * counting only records, as upstream's recordNum). */
    if (!strstr(log, "empty token has been found in token file '" PATH "', record number '1'") ||
        !strstr(log, "empty token has been found in token file '" PATH "', record number '3'"))
        fail_msg("warnings missing: %s", log);
    free(log);
    tokenfile_free(t);

    /* Only empty tokens: an empty table, which lookups still work on
     * (bsearch over no entries at all was undefined behaviour). */
    capture_start();
    t = parse_ok(",nobody,0\n\"\",nobody2,1\n");
    free(capture_end());
    assert_int_equal(tokenfile_count(t), 0);
    expect_absent(t, "");
    expect_absent(t, "nobody");
    tokenfile_free(t);
}

static void test_duplicate_token_later_wins(void **state)
{
    (void)state;
    capture_start();
    tokenfile *t = parse_ok("dup,first,1,g1\n"
                            "other,bob,2\n"
                            "dup,second,2,g2\n"
                            "\n"
                            "dup,third,3,\"g3,g4\"\n"
                            "zzz,zed,9\n");
    char *log = capture_end();
    assert_int_equal(tokenfile_count(t), 3);
    expect_user(t, "dup", "third", "3", "g3", "g4", NULL);
    expect_user(t, "other", "bob", "2", NULL);
    expect_user(t, "zzz", "zed", "9", NULL);
    /* One warning for each record that repeats a token, naming it by
     * its record number as upstream's. */
    if (count_of(log, "duplicate token has been found in token file '" PATH "'") != 2 ||
        !strstr(log, "record number '3'") || !strstr(log, "record number '4'"))
        fail_msg(
            "expected duplicate warnings for records 3 and 4 (the blank line is no record): %s",
            log);
    free(log);
    tokenfile_free(t);

    /* Quoting does not make a token different. */
    capture_start();
    t = parse_ok("tok,first,1\n\"tok\",second,2\n");
    free(capture_end());
    assert_int_equal(tokenfile_count(t), 1);
    expect_user(t, "tok", "second", "2", NULL);
    tokenfile_free(t);
}

/* ---- lookups ---------------------------------------------------------- */

static void test_lookup_unknown(void **state)
{
    (void)state;
    tokenfile *t = parse_ok("abc,alice,1\nabd,bob,2\n");
    expect_absent(t, "ab");
    expect_absent(t, "abcd");
    expect_absent(t, "ABC");
    expect_absent(t, "abc ");
    expect_absent(t, " abc");
    expect_absent(t, "");
    expect_absent(t, "zzz");
    expect_absent(t, "a");
    assert_null(tokenfile_lookup(t, NULL));
    assert_null(tokenfile_lookup(NULL, "abc"));
    assert_int_equal(tokenfile_count(NULL), 0);
    tokenfile_free(NULL);
    tokenfile_free(t);
}

static void test_lookup_refcount(void **state)
{
    (void)state;
    tokenfile *t = parse_ok("tok1,alice,uid1,\"g1,g2\"\n");
    auth_user *a = tokenfile_lookup(t, "tok1");
    auth_user *b = tokenfile_lookup(t, "tok1");
    assert_non_null(a);
    assert_non_null(b);
    assert_ptr_equal(a, b); /* one shared, immutable user */
    assert_int_equal(atomic_load(&a->refs), 3);
    tokenfile_free(t);
    /* Our references keep the user. */
    assert_int_equal(atomic_load(&a->refs), 2);
    assert_string_equal(a->name, "alice");
    assert_string_equal(a->uid, "uid1");
    assert_int_equal(a->ngroups, 2);
    assert_string_equal(a->groups[1], "g2");
    auth_user_unref(a);
    assert_string_equal(b->name, "alice");
    auth_user_unref(b);
}

/* ---- files ------------------------------------------------------------ */

static void write_file(const char *path, const char *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

static void test_load_file(void **state)
{
    (void)state;
    char path[600];
    snprintf(path, sizeof path, "%s/tokens.csv", dir);
    const char *s = "tok1,alice,uid1,\"system:masters\"\r\n,skipped,0\r\ntok2,bob,uid2\r\n";
    write_file(path, s, strlen(s));
    capture_start();
    char *err = NULL;
    tokenfile *t = tokenfile_load(path, &err);
    char *log = capture_end();
    assert_null(err);
    assert_non_null(t);
    assert_int_equal(tokenfile_count(t), 2);
    expect_user(t, "tok1", "alice", "uid1", "system:masters", NULL);
    expect_user(t, "tok2", "bob", "uid2", NULL);
    /* The warnings name the file loaded. */
    assert_non_null(strstr(log, path));
    free(log);
    tokenfile_free(t);

    /* A malformed file's error names it too. */
    write_file(path, "tok1,alice\n", 11);
    t = tokenfile_load(path, &err);
    assert_null(t);
    assert_non_null(err);
    char want[800];
    snprintf(want, sizeof want,
             "token file '%s' must have at least 3 columns (token, user name, user uid), found 2",
             path);
    assert_string_equal(err, want);
    free(err);
    err = NULL;

    /* An empty file holds no tokens. */
    write_file(path, "", 0);
    t = tokenfile_load(path, &err);
    assert_non_null(t);
    assert_null(err);
    assert_int_equal(tokenfile_count(t), 0);
    tokenfile_free(t);
    unlink(path);
}

static void test_load_missing_file(void **state)
{
    (void)state;
    char path[600];
    snprintf(path, sizeof path, "%s/no-such-tokens.csv", dir);
    char *err = NULL;
    assert_null(tokenfile_load(path, &err));
    assert_non_null(err);
    if (!strstr(err, path) || !strstr(err, "No such file or directory"))
        fail_msg("error \"%s\" does not name %s and why", err, path);
    free(err);
}

static void test_load_directory(void **state)
{
    (void)state;
    char *err = NULL;
    assert_null(tokenfile_load(dir, &err));
    assert_non_null(err);
    if (!strstr(err, dir))
        fail_msg("error \"%s\" does not name %s", err, dir);
    free(err);
}

static void test_load_size_limit(void **state)
{
    (void)state;
    char path[600];
    snprintf(path, sizeof path, "%s/big.csv", dir);
    /* Exactly the limit: a record, then blank lines up to it. */
    const char *rec = "tok1,alice,uid1\n";
    char *buf = malloc(MAX_FILE + 1);
    assert_non_null(buf);
    memset(buf, '\n', MAX_FILE + 1);
    memcpy(buf, rec, strlen(rec));
    write_file(path, buf, MAX_FILE);
    char *err = NULL;
    tokenfile *t = tokenfile_load(path, &err);
    if (!t)
        fail_msg("a file of exactly %u bytes: %s", MAX_FILE, err ? err : "?");
    expect_user(t, "tok1", "alice", "uid1", NULL);
    tokenfile_free(t);

    /* One byte more is refused, before it is parsed. */
    write_file(path, buf, MAX_FILE + 1);
    free(buf);
    assert_null(tokenfile_load(path, &err));
    assert_non_null(err);
    char want[800];
    snprintf(want, sizeof want, "token file '%s' is over %u bytes", path, MAX_FILE);
    assert_string_equal(err, want);
    free(err);
    err = NULL;

    /* Far over (a sparse file): refused without reading it all in. */
    int fd = open(path, O_WRONLY | O_TRUNC);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, (off_t)1 << 32), 0);
    close(fd);
    assert_null(tokenfile_load(path, &err));
    assert_non_null(err);
    assert_non_null(strstr(err, "is over"));
    free(err);
    unlink(path);
}

/* The token of record i of the large file (distinct, unordered). */
static void big_token(size_t i, char *out, size_t n)
{
    snprintf(out, n, "%08zx-%zu-tok", (i * 2654435761u) % 100003u, i);
}

static void test_large_file(void **state)
{
    (void)state;
    enum { N = 50000 };
    char path[600];
    snprintf(path, sizeof path, "%s/large.csv", dir);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    char tok[64];
    for (size_t i = 0; i < N; i++) {
        big_token(i, tok, sizeof tok);
        if (i % 3 == 0)
            fprintf(f, "%s,user-%zu,uid-%zu,\"g%zu,all\"\n", tok, i, i, i % 7);
        else
            fprintf(f, "\"%s\",user-%zu,uid-%zu\r\n", tok, i, i);
    }
    assert_int_equal(fclose(f), 0);

    char *err = NULL;
    tokenfile *t = tokenfile_load(path, &err);
    unlink(path);
    if (!t)
        fail_msg("load: %s", err ? err : "?");
    assert_int_equal(tokenfile_count(t), N);
    char want[64];
    for (size_t i = 0; i < N; i++) {
        big_token(i, tok, sizeof tok);
        auth_user *u = tokenfile_lookup(t, tok);
        if (!u)
            fail_msg("token %zu (%s) not found", i, tok);
        snprintf(want, sizeof want, "user-%zu", i);
        assert_string_equal(u->name, want);
        snprintf(want, sizeof want, "uid-%zu", i);
        assert_string_equal(u->uid, want);
        if (i % 3 == 0) {
            assert_int_equal(u->ngroups, 2);
            snprintf(want, sizeof want, "g%zu", i % 7);
            assert_string_equal(u->groups[0], want);
            assert_string_equal(u->groups[1], "all");
        } else {
            assert_int_equal(u->ngroups, 0);
        }
        auth_user_unref(u);
        /* A near miss is no token. */
        tok[strlen(tok) - 1] = 'X';
        expect_absent(t, tok);
    }
    tokenfile_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_basic_records),
        cmocka_unit_test(test_last_line_without_newline),
        cmocka_unit_test(test_empty_inputs),
        cmocka_unit_test(test_empty_uid_and_name),
        cmocka_unit_test(test_whitespace_is_data),
        cmocka_unit_test(test_groups_column),
        cmocka_unit_test(test_columns_past_the_fourth_ignored),
        cmocka_unit_test(test_quoted_fields),
        cmocka_unit_test(test_quoted_field_spanning_lines),
        cmocka_unit_test(test_crlf_file),
        cmocka_unit_test(test_lone_cr_is_data),
        cmocka_unit_test(test_blank_lines_skipped),
        cmocka_unit_test(test_whitespace_line_is_not_blank),
        cmocka_unit_test(test_utf8),
        cmocka_unit_test(test_fewer_than_three_columns),
        cmocka_unit_test(test_bare_quote),
        cmocka_unit_test(test_text_after_closing_quote),
        cmocka_unit_test(test_unterminated_quote),
        cmocka_unit_test(test_error_positions_as_go),
        cmocka_unit_test(test_errors_from_a_prefix_only),
        cmocka_unit_test(test_empty_token_skipped),
        cmocka_unit_test(test_duplicate_token_later_wins),
        cmocka_unit_test(test_lookup_unknown),
        cmocka_unit_test(test_lookup_refcount),
        cmocka_unit_test(test_load_file),
        cmocka_unit_test(test_load_missing_file),
        cmocka_unit_test(test_load_directory),
        cmocka_unit_test(test_load_size_limit),
        cmocka_unit_test(test_large_file),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
