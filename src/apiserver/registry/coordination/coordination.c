/* coordination.k8s.io/v1: leases, and coordination_install, which
 * serves them. */
#include "apiserver/registry/coordination/coordination.h"

#include "apiserver/registry/builtin/builtin.h"
#include "apiserver/registry/definitions/builtin_patchmeta.h"
#include "ckube/json.h"
#include "ckube/validation.h"

static void lease_validate(const resource_type *t, const json_t *obj, const json_t *old,
                           ckube_status *st)
{
    json_t *d = ckube_json_get_path(obj, "spec.leaseDurationSeconds");
    if (d && (!json_is_integer(d) || json_integer_value(d) <= 0))
        ckube_field_invalid_int(st, "spec.leaseDurationSeconds", json_integer_value(d),
                                "must be greater than 0");
}

static const col_def cols_lease[] = {
    NAME_COL,
    {"Holder", "string", "", ".spec.holderIdentity", NULL, 0, "The current holder."},
    AGE_COL,
    END_COL};

static const builtin types[] = {
    {"coordination.k8s.io",
     "v1",
     "leases",
     "Lease",
     "lease",
     true,
     {NULL},
     {NULL},
     false,
     false,
     false,
     CKUBE_NAME_DNS1123_SUBDOMAIN,
     patchmeta_lease,
     cols_lease,
     NULL,
     NULL,
     NULL,
     lease_validate,
     NULL,
     NULL,
     true,
     false},
};

int coordination_install(registry *reg)
{
    return builtin_install(reg, types, sizeof types / sizeof *types);
}
