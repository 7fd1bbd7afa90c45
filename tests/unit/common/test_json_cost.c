/* Tests for common/json_cost.h: its prices must not be below what jansson
 * really allocates (decoders bound memory with them), nor far above it
 * (they would refuse good bodies). Measured through jansson's allocator
 * hook, with glibc's malloc_usable_size plus the chunk header. */
#include <malloc.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>
#include <jansson.h>

#include "common/json_cost.h"

static size_t allocated;

static void *counting_malloc(size_t n)
{
    void *p = malloc(n);
    if (p)
        allocated += malloc_usable_size(p) + sizeof(size_t);
    return p;
}

static void counting_free(void *p)
{
    if (p)
        allocated -= malloc_usable_size(p) + sizeof(size_t);
    free(p);
}

#define N 20000

/* Average bytes per value of `make` when N of them sit in one array (the
 * array's own table, i.e. the slot, included). */
static double per_element(json_t *(*make)(int))
{
    json_t *a = json_array();
    size_t before = allocated;
    for (int i = 0; i < N; i++)
        json_array_append_new(a, make(i));
    double per = (double)(allocated - before) / N;
    json_decref(a);
    return per;
}

static json_t *mk_object(int i)
{
    (void)i;
    return json_object();
}
static json_t *mk_array(int i)
{
    (void)i;
    return json_array();
}
static json_t *mk_int(int i)
{
    return json_integer(i);
}
static json_t *mk_real(int i)
{
    return json_real(i + 0.5);
}
static json_t *mk_true(int i)
{
    (void)i;
    return json_true();
}
static json_t *mk_str0(int i)
{
    (void)i;
    return json_string("");
}
static json_t *mk_str40(int i)
{
    (void)i;
    return json_string("0123456789012345678901234567890123456789");
}

/* The price must cover the measure; off ASan (whose allocator reports
 * sizes as asked, without glibc's rounding) it must also stay within 40%
 * of it, or good bodies would be refused for nothing. */
static void check(const char *what, double measured, double price)
{
    print_message("%-22s measured %7.1f  priced %7.1f\n", what, measured, price);
    assert_true(price >= measured);
#ifndef __SANITIZE_ADDRESS__
    assert_true(price <= measured * 1.4 + 16);
#endif
}

static void test_prices_cover_jansson(void **state)
{
    (void)state;
    check("empty object + slot", per_element(mk_object), JCOST_OBJECT + JCOST_ELEMENT);
    check("empty array + slot", per_element(mk_array), JCOST_ARRAY + JCOST_ELEMENT);
    check("integer + slot", per_element(mk_int), JCOST_NUMBER + JCOST_ELEMENT);
    check("real + slot", per_element(mk_real), JCOST_NUMBER + JCOST_ELEMENT);
    check("true (shared) + slot", per_element(mk_true), JCOST_ELEMENT);
    check("string \"\" + slot", per_element(mk_str0), JCOST_STRING(0) + JCOST_ELEMENT);
    check("string of 40 + slot", per_element(mk_str40), JCOST_STRING(40) + JCOST_ELEMENT);

    /* Members, with the hash table's growth, at several sizes. */
    for (int n = 10; n <= 100000; n *= 10) {
        json_t *o = json_object();
        size_t before = allocated;
        char key[16];
        for (int i = 0; i < n; i++) {
            snprintf(key, sizeof key, "k%06d", i);
            json_object_set_new(o, key, json_true());
        }
        char what[32];
        snprintf(what, sizeof what, "member (7) of %d", n);
        check(what, (double)(allocated - before) / n, JCOST_MEMBER(7));
        json_decref(o);
    }
}

int main(void)
{
    json_set_alloc_funcs(counting_malloc, counting_free);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prices_cover_jansson),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
