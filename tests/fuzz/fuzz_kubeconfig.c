/* Fuzz target for kubeconfig parsing (ckube/config.h).
 *
 * Any input either loads into a config with a host, or fails with a
 * Status carrying a message; nothing crashes or leaks. The same input is
 * also tried with overrides naming a context, cluster and user, which
 * exercises the lookup and error paths. Relative paths resolve against a
 * directory that does not exist, so nothing outside is read by accident. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "ckube/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void load(const uint8_t *data, size_t size, const ckube_config_overrides *o)
{
    ckube_config *cfg = NULL;
    ckube_status *err = NULL;
    int rc = ckube_config_from_kubeconfig_data((const char *)data, size, "/nonexistent-fuzz-dir", o,
                                               &cfg, &err);
    if (rc == 0) {
        if (!cfg || !cfg->host)
            abort(); /* success must give a usable config */
        ckube_config *copy = ckube_config_dup(cfg);
        if (!copy)
            abort();
        ckube_config_free(copy);
    } else if (!err || !err->message) {
        abort(); /* failure must say why */
    }
    ckube_config_free(cfg);
    ckube_status_free(err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    load(data, size, NULL);
    ckube_config_overrides o = {
        .context = "dev", .cluster = "c1", .user = "u1", .namespace_ = "ns"};
    load(data, size, &o);
    ckube_config_overrides m = {.master = "https://127.0.0.1:1"};
    load(data, size, &m);
    return 0;
}
