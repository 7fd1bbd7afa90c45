/* Fuzzes the label and field selector parsers, and the conversion of a
 * LabelSelector object (an input that is JSON).
 *
 * Invariants checked: parsing never crashes or leaks; an accepted selector's
 * canonical string parses again to the same number of requirements, and is
 * a fixed point from then on; matching against a tiny object is safe. A
 * LabelSelector accepted by ckube_label_selector_from_json is valid as a
 * string too: its canonical form parses (with as many requirements). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "ckube/selector.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *lookup(void *ctx, const char *key)
{
    (void)ctx;
    if (strcmp(key, "a") == 0)
        return "1";
    if (strcmp(key, "metadata.name") == 0)
        return "x";
    return NULL;
}

typedef int (*parse_fn)(const char *, ckube_selector **, char **);

static void check(parse_fn parse, const char *in)
{
    ckube_selector *sel = NULL;
    char *err = NULL;
    if (parse(in, &sel, &err) != 0) {
        if (!err || sel)
            abort(); /* errors always carry a message and no selector */
        free(err);
        return;
    }
    (void)ckube_selector_matches(sel, lookup, NULL);
    (void)ckube_selector_required_value(sel, "a");
    char *s1 = ckube_selector_string(sel);
    ckube_selector *again = NULL;
    if (!s1 || parse(s1, &again, NULL) != 0 || again->nreqs != sel->nreqs) {
        fprintf(stderr, "canonical form does not re-parse: [%s] -> [%s]\n", in, s1);
        abort();
    }
    char *s2 = ckube_selector_string(again);
    ckube_selector *third = NULL;
    if (!s2 || parse(s2, &third, NULL) != 0)
        abort();
    char *s3 = ckube_selector_string(third);
    if (!s3 || strcmp(s2, s3) != 0) {
        fprintf(stderr, "not a fixed point: [%s] -> [%s] -> [%s]\n", s1, s2, s3);
        abort();
    }
    free(s1);
    free(s2);
    free(s3);
    ckube_selector_free(sel);
    ckube_selector_free(again);
    ckube_selector_free(third);
}

static void check_json(const uint8_t *data, size_t size)
{
    json_t *ls = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL);
    if (!ls)
        return;
    ckube_selector *sel = NULL;
    char *err = NULL;
    if (ckube_label_selector_from_json(ls, &sel, &err) != 0) {
        if (!err || sel)
            abort();
        free(err);
        json_decref(ls);
        return;
    }
    (void)ckube_selector_matches(sel, lookup, NULL);
    char *s = ckube_selector_string(sel);
    ckube_selector *again = NULL;
    if (!s || ckube_label_selector_parse(s, &again, NULL) != 0 || again->nreqs != sel->nreqs) {
        fprintf(stderr, "LabelSelector's string does not parse: [%s]\n", s ? s : "(null)");
        abort();
    }
    free(s);
    ckube_selector_free(sel);
    ckube_selector_free(again);
    json_decref(ls);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check_json(data, size);
    char *in = malloc(size + 1);
    if (!in)
        return 0;
    memcpy(in, data, size);
    in[size] = 0;
    check(ckube_label_selector_parse, in);
    check(ckube_field_selector_parse, in);
    free(in);
    return 0;
}
