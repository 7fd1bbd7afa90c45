/* Tests for ckube/status.h: the bound on causes, and the Invalid message
 * composed from what is kept. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ckube/status.h"

static void test_causes_are_bounded(void **state)
{
    (void)state;
    ckube_status *st = ckube_status_invalid_begin("", "ConfigMap", "c");
    for (int i = 0; i < CKUBE_STATUS_MAX_CAUSES + 250; i++)
        ckube_status_add_cause(st, "FieldValueInvalid", "data", "Invalid value: %d", i);
    assert_int_equal(st->ncauses, CKUBE_STATUS_MAX_CAUSES);
    assert_int_equal(st->ncauses_dropped, 250);
    assert_string_equal(st->causes[999].message, "Invalid value: 999");
    ckube_status_invalid_finish(st);
    const char *tail = ", data: Invalid value: 999, and 250 more errors]";
    size_t n = strlen(st->message), t = strlen(tail);
    assert_true(n > t);
    assert_string_equal(st->message + n - t, tail);
    assert_int_equal(
        strncmp(st->message, "ConfigMap \"c\" is invalid: [data: Invalid value: 0, ", 49), 0);
    /* The JSON form carries the kept causes. */
    json_t *j = ckube_status_to_json(st);
    assert_int_equal(json_array_size(json_object_get(json_object_get(j, "details"), "causes")),
                     CKUBE_STATUS_MAX_CAUSES);
    json_decref(j);
    ckube_status_free(st);

    /* Below the bound nothing changes: one cause, no brackets. */
    st = ckube_status_invalid_begin("apps", "Deployment", "d");
    ckube_status_add_cause(st, "FieldValueRequired", "spec.selector", "Required value");
    ckube_status_invalid_finish(st);
    assert_string_equal(st->message,
                        "Deployment.apps \"d\" is invalid: spec.selector: Required value");
    ckube_status_free(st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_causes_are_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
