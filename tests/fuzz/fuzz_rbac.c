/* Fuzzes RBAC's rule compiler and matcher (apiserver/authorization/rbac).
 *
 * The input is a JSON document {"rules": [...], "request": {...},
 * "subject": {...}, "user": "...", "groups": [...]}; whatever parses is
 * compiled and matched. Invariants: nothing crashes or leaks; a rule
 * with "*" verbs, groups and resources allows every resource request; a
 * request allowed by one compiled rule is allowed by the same rule
 * compiled again (matching has no state); every right is covered by
 * full authority ("*" on everything and every URL), and rules cover
 * themselves (rbac_uncovered_rights) unless one names both resources and
 * URLs (upstream's coverage asks a URL right's owner for no names). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "apiserver/authorization/rbac/rules.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *str(const json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : "";
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *doc = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL);
    if (!doc)
        return 0;
    const json_t *q = json_object_get(doc, "request");
    rbac_request req = {.verb = str(q, "verb"),
                        .resource_request = !json_is_true(json_object_get(q, "nonResource")),
                        .api_group = str(q, "apiGroup"),
                        .resource = str(q, "resource"),
                        .subresource = str(q, "subresource"),
                        .name = str(q, "name"),
                        .namespace_ = str(q, "namespace"),
                        .path = str(q, "path")};
    rbac_rule *rules = NULL, *again = NULL;
    size_t n = 0, n2 = 0;
    if (rbac_rules_compile(json_object_get(doc, "rules"), &rules, &n) == 0) {
        rbac_rules_compile(json_object_get(doc, "rules"), &again, &n2);
        if (n != n2)
            abort();
        for (size_t i = 0; i < n; i++)
            if (rbac_rule_allows(&rules[i], &req) != rbac_rule_allows(&again[i], &req))
                abort();
        rbac_rules_free(again, n2);
    }
    rbac_rules_free(rules, n);
    json_t *all =
        json_loads("[{\"verbs\":[\"*\"],\"apiGroups\":[\"*\"],\"resources\":[\"*\"]}]", 0, NULL);
    if (rbac_rules_compile(all, &rules, &n) == 0) {
        if (req.resource_request && !rbac_rule_allows(&rules[0], &req))
            abort();
        rbac_rules_free(rules, n);
    }
    json_decref(all);
    const json_t *wanted = json_object_get(doc, "rules");
    if (json_is_array(wanted)) {
        json_t *full = json_loads("[{\"verbs\":[\"*\"],\"apiGroups\":[\"*\"],\"resources\":[\"*\"]},"
                                  "{\"verbs\":[\"*\"],\"nonResourceURLs\":[\"*\"]}]",
                                  0, NULL);
        rbac_rules_compile(full, &rules, &n);
        char *miss = rbac_uncovered_rights(rules, n, wanted);
        if (miss)
            abort();
        rbac_rules_free(rules, n);
        json_decref(full);
        bool mixed = false;
        size_t k;
        const json_t *r;
        json_array_foreach(wanted, k, r) mixed |=
            json_array_size(json_object_get(r, "resourceNames")) &&
            json_array_size(json_object_get(r, "nonResourceURLs"));
        rbac_rules_compile(wanted, &rules, &n);
        miss = rbac_uncovered_rights(rules, n, wanted);
        if (miss && !mixed)
            abort();
        free(miss);
        rbac_rules_free(rules, n);
    }
    const char *groups[8];
    size_t ng = 0, i;
    const json_t *g;
    json_array_foreach(json_object_get(doc, "groups"), i, g)
    {
        if (ng < 8 && json_is_string(g))
            groups[ng++] = json_string_value(g);
    }
    rbac_user u = {.name = str(doc, "user"), .groups = groups, .ngroups = ng};
    (void)rbac_subject_applies(json_object_get(doc, "subject"), &u, str(q, "namespace"));
    json_decref(doc);
    return 0;
}
