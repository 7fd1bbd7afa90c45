/* json_cost.c - the memory a jansson tree takes (see json_cost.h). */
#include "common/json_cost.h"

size_t ckube__json_cost(const json_t *v, size_t limit)
{
    size_t n;
    const char *key;
    size_t key_len, i;
    json_t *c;
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        n = JCOST_OBJECT;
        json_object_keylen_foreach((json_t *)v, key, key_len, c)
        {
            if (n > limit)
                break;
            n += JCOST_MEMBER(key_len);
            n += ckube__json_cost(c, limit > n ? limit - n : 0);
        }
        return n;
    case JSON_ARRAY:
        n = JCOST_ARRAY;
        json_array_foreach(v, i, c)
        {
            if (n > limit)
                break;
            n += JCOST_ELEMENT + ckube__json_cost(c, limit > n ? limit - n : 0);
        }
        return n;
    case JSON_STRING:
        return JCOST_STRING(json_string_length(v));
    case JSON_INTEGER:
    case JSON_REAL:
        return JCOST_NUMBER;
    default:
        return 0;
    }
}
