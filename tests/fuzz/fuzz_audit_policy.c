/* Fuzzes the audit policy reader (apiserver/audit/policy).
 *
 * Each input is parsed as a policy file; nothing may crash, leak or read
 * past the input. A refusal carries a message; an accepted policy has a
 * rule and answers every probe below with a level it could hold. Then
 * the input is read the way upstream reads YAML (converted to JSON first)
 * and the JSON text, parsed again, must give the same answer: the same
 * refusal word for word, or a policy deciding every probe alike. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "apiserver/audit/policy.h"
#include "ckube/json.h"
#include "ckube/log.h"
#include "ckube/yaml.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const groups[] = {"system:authenticated", "system:masters", "dev", ""};

/* Requests of every shape the checker tells apart. */
static const audit_attributes probes[] = {
    {"alice", groups, 1, "get", true, "", "pods", "", "default", "web", NULL},
    {"alice", groups, 3, "get", true, "", "pods", "log", "default", "web", NULL},
    {"bob", groups, 2, "watch", true, "apps", "deployments", "status", "kube-system", "", NULL},
    {"system:kube-proxy", groups, 1, "list", true, "", "endpoints", "", "", "", NULL},
    {"bob", groups, 4, "update", true, "coordination.k8s.io", "leases", "", "kube-system", "x",
     NULL},
    {"", NULL, 0, "create", true, "", "namespaces", "", "", "", NULL},
    {NULL, NULL, 0, "get", false, NULL, NULL, NULL, NULL, NULL, "/healthz"},
    {"alice", groups, 1, "get", false, NULL, NULL, NULL, NULL, NULL, "/api/v1"},
    {"alice", groups, 1, "post", false, NULL, NULL, NULL, NULL, NULL, "/metrics/x"},
    {"alice", groups, 1, "get", false, NULL, NULL, NULL, NULL, NULL, ""},
};
#define NPROBES (sizeof probes / sizeof probes[0])

static void check_policy(const audit_policy *p)
{
    if (audit_policy_rule_count(p) == 0)
        abort();
    for (size_t i = 0; i < NPROBES; i++) {
        audit_decision d;
        audit_level l = audit_policy_decide(p, &probes[i], &d);
        if (l != d.level || (unsigned)l > AUDIT_LEVEL_REQUEST_RESPONSE || d.omit_stages > 15)
            abort();
    }
}

static bool same_decisions(const audit_policy *a, const audit_policy *b)
{
    for (size_t i = 0; i < NPROBES; i++) {
        audit_decision x, y;
        audit_policy_decide(a, &probes[i], &x);
        audit_policy_decide(b, &probes[i], &y);
        if (x.level != y.level || x.omit_stages != y.omit_stages ||
            x.omit_managed_fields != y.omit_managed_fields)
            return false;
    }
    return true;
}

static bool json_like(const uint8_t *s, size_t n)
{
    size_t i = 0;
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r' || s[i] == '\v' ||
                     s[i] == '\f'))
        i++;
    return i < n && s[i] == '{';
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static bool quiet;
    if (!quiet) {
        /* Unknown fields make a warning each: keep stderr for crashes. */
        ckube_log_set_flag("logtostderr", "false", NULL);
        ckube_log_set_flag("log-file", "/dev/null", NULL);
        quiet = true;
    }
    const char *s = (const char *)data;
    char *err = NULL;
    audit_policy *p = audit_policy_parse(s, size, &err);
    if (!p) {
        if (!err || !*err)
            abort();
    } else {
        if (err)
            abort();
        check_policy(p);
    }

    /* YAML as upstream reads it: to JSON, then decoded. */
    if (!json_like(data, size)) {
        json_t *doc = ckube_yaml_load(s, size, NULL);
        char *text = json_is_object(doc) ? ckube_json_dumps(doc, NULL) : NULL;
        /* The JSON reader refuses "\u0000" (the YAML one takes it), and
         * JSON text opens with '{' only for an object. */
        if (text && !strstr(text, "\\u0000")) {
            char *err2 = NULL;
            audit_policy *q = audit_policy_parse(text, strlen(text), &err2);
            if (!p != !q)
                abort();
            if (p && !same_decisions(p, q))
                abort();
            if (!p && strcmp(err, err2))
                abort();
            audit_policy_free(q);
            free(err2);
        }
        free(text);
        json_decref(doc);
    }
    audit_policy_free(p);
    free(err);
    return 0;
}
