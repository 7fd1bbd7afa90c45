/* rotate_util.h - what the tests of certificate reloading share: files
 * replaced whole, as certificate renewers (kubelet, cert-manager) replace
 * them, and a wait for the next second, since the servers look at their
 * files at most once a second. Static inline, for tests that include
 * <cmocka.h> first: each test is its own program. */
#ifndef CKUBE_TEST_ROTATE_UTIL_H
#define CKUBE_TEST_ROTATE_UTIL_H

#include <poll.h>
#include <stdio.h>
#include <time.h>

/* Copies file `from` over `to`: written beside it, then renamed into
 * place, so a reader never sees half a file. */
static inline void tu_replace_file(const char *from, const char *to)
{
    char tmp[4200], buf[4096];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp", to) >= sizeof tmp)
        fail_msg("path too long: %s", to);
    FILE *in = fopen(from, "r"), *out = fopen(tmp, "w");
    assert_non_null(in);
    assert_non_null(out);
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        assert_int_equal(fwrite(buf, 1, n, out), n);
    fclose(in);
    assert_int_equal(fclose(out), 0);
    assert_int_equal(rename(tmp, to), 0);
}

/* Returns once the wall clock's second has changed: a change made in
 * this second is seen at the next look. */
static inline void tu_next_second(void)
{
    time_t t = time(NULL);
    while (time(NULL) == t)
        poll(NULL, 0, 10);
}

#endif
