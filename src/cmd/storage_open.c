/* storage_open.c - see storage_open.h. */
#include "cmd/storage_open.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/text.h"

storage *cmd_storage_open_etcd(const char *servers, const char *prefix, const etcd_tls *tls,
                               char **err)
{
    /* Beside the binary, not on the library path: the module and the
     * binary are one build (the module resolves the binary's helpers). */
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    char *slash = n > 0 ? (self[n] = 0, strrchr(self, '/')) : NULL;
    if (!slash) {
        ckube__set_err(err, "cannot find the directory of the ckube binary");
        return NULL;
    }
    slash[1] = 0;
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s%s", self, STORAGE_ETCD_MODULE);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        ckube__set_err(err, "etcd storage: cannot load %s: %s", path, dlerror());
        return NULL;
    }
    storage_etcd_open_fn open_fn;
    *(void **)&open_fn = dlsym(h, STORAGE_ETCD_OPEN_SYMBOL);
    if (!open_fn) {
        ckube__set_err(err, "etcd storage: %s has no %s", path, STORAGE_ETCD_OPEN_SYMBOL);
        dlclose(h);
        return NULL;
    }
    return open_fn(servers, prefix, true, tls, err);
}
