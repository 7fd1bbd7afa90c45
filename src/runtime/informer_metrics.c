/* informer_metrics.c - per-informer cache size as Prometheus gauges (see
 * ckube_informer_metrics_register in ckube/informer.h). The values are
 * read from the store's own accounting at scrape time, so nothing is
 * tracked twice. */
#include <ckube/informer.h>
#include <ckube/metrics.h>

#include <stdlib.h>

struct ckube_informer_metrics {
    ckube_metrics_registry *reg;
    ckube_metrics_collector *collector;
    ckube_shared_informer *inf;
    ckube_metric *objects, *bytes, *synced;
};

static void collect(void *ctx)
{
    ckube_informer_metrics *m = ctx;
    ckube_gauge_set(m->objects, (double)ckube_shared_informer_object_count(m->inf));
    ckube_gauge_set(m->bytes, (double)ckube_shared_informer_bytes(m->inf));
    ckube_gauge_set(m->synced, ckube_shared_informer_has_synced(m->inf) ? 1 : 0);
}

ckube_informer_metrics *ckube_informer_metrics_register(ckube_metrics_registry *reg,
                                                        ckube_shared_informer *inf)
{
    if (!inf)
        return NULL;
    if (!reg)
        reg = ckube_metrics_default();
    static const char *const labels[] = {"informer", NULL};
    ckube_metric_family *objects = ckube_metrics_gauge(
        reg, "ckube_informer_objects", "Number of objects in the informer's cache", labels);
    ckube_metric_family *bytes =
        ckube_metrics_gauge(reg, "ckube_informer_bytes",
                            "Heap bytes held by the objects in the informer's cache", labels);
    ckube_metric_family *synced = ckube_metrics_gauge(
        reg, "ckube_informer_synced", "1 when the informer's cache has synced", labels);
    if (!objects || !bytes || !synced)
        return NULL;
    ckube_informer_metrics *m = calloc(1, sizeof(*m));
    if (!m)
        return NULL;
    const char *lv[] = {ckube_shared_informer_name(inf)};
    m->reg = reg;
    m->inf = inf;
    m->objects = ckube_metric_with(objects, lv);
    m->bytes = ckube_metric_with(bytes, lv);
    m->synced = ckube_metric_with(synced, lv);
    m->collector = ckube_metrics_add_collector(reg, collect, m);
    if (!m->collector) {
        free(m);
        return NULL;
    }
    return m;
}

void ckube_informer_metrics_unregister(ckube_informer_metrics *m)
{
    if (!m)
        return;
    ckube_metrics_remove_collector(m->reg, m->collector);
    free(m);
}
