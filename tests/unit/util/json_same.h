/* json_same.h - JSON equality for round-trip tests: numbers compare by
 * value (3 and 3.0 are one number: ckube's typed encoding writes an
 * integral number as an integer, as Go's encoding/json does), objects
 * by members in any order. Static inline: each test is its own program. */
#ifndef CKUBE_TEST_JSON_SAME_H
#define CKUBE_TEST_JSON_SAME_H

#include <jansson.h>
#include <stdbool.h>
#include <string.h>

static inline bool json_same(const json_t *a, const json_t *b)
{
    if (json_is_number(a) && json_is_number(b)) {
        if (json_is_integer(a) && json_is_integer(b))
            return json_integer_value(a) == json_integer_value(b);
        return json_number_value(a) == json_number_value(b);
    }
    if (json_typeof(a) != json_typeof(b))
        return false;
    if (json_is_string(a))
        return json_string_length(a) == json_string_length(b) &&
               !memcmp(json_string_value(a), json_string_value(b), json_string_length(a));
    if (json_is_array(a)) {
        if (json_array_size(a) != json_array_size(b))
            return false;
        for (size_t i = 0; i < json_array_size(a); i++)
            if (!json_same(json_array_get(a, i), json_array_get(b, i)))
                return false;
        return true;
    }
    if (json_is_object(a)) {
        if (json_object_size(a) != json_object_size(b))
            return false;
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)a, k, v)
        {
            json_t *w = json_object_get(b, k);
            if (!w || !json_same(v, w))
                return false;
        }
        return true;
    }
    return true; /* true, false, null */
}

#endif
