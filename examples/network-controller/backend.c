/* backend.c - what every backend shares. See backend.h. */
#include "backend.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

void netctl_backend_free(netctl_backend *b)
{
    if (b)
        b->ops->free(b);
}

bool netctl_actual_matches(const netctl_actual *actual, const netctl_want *want)
{
    return actual->exists && actual->up && actual->naddrs == 1 &&
           actual->addrs[0].len == want->cidr.len &&
           netaddr_equal(&actual->addrs[0].addr, &want->gateway);
}

void netctl_device_name(const char *key, char out[16])
{
    /* FNV-1a: stable across runs and machines, which is what matters
     * here (a restarted controller finds its bridges by name as well as
     * by alias). Collisions are caught by the alias check. */
    uint32_t h = 2166136261u;
    for (const unsigned char *p = (const unsigned char *)key; *p; p++) {
        h ^= *p;
        h *= 16777619u;
    }
    snprintf(out, 16, "ckn-%08x", h);
}

void netctl_free_keys(char **keys, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(keys[i]);
    free(keys);
}
