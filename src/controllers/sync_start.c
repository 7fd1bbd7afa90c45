/* sync_start.c - see sync_start.h. */
#include "controllers/sync_start.h"

#include <ckube/log.h>

static bool all_synced(sync_start *s)
{
    for (int i = 0; i < s->ninf; i++)
        if (!ckube_shared_informer_has_synced(s->inf[i]))
            return false;
    return true;
}

void sync_start_init(sync_start *s, ckube_controller *ctl, ckube_shared_informer *const *inf,
                     int ninf, ckube_clock *clock, const char *name, const char *thread)
{
    *s = (sync_start){.ctl = ctl, .clock = clock, .name = name, .thread = thread};
    for (int i = 0; i < ninf && i < SYNC_START_MAX_INFORMERS; i++)
        s->inf[s->ninf++] = inf[i];
    pthread_mutex_init(&s->mu, NULL);
    ckube_cond_init(&s->cond);
}

static void *wait_then_start(void *arg)
{
    sync_start *s = arg;
    pthread_setname_np(pthread_self(), s->thread);
    pthread_mutex_lock(&s->mu);
    while (!s->stopping && !all_synced(s))
        ckube_clock_cond_wait(s->clock, &s->cond, &s->mu, ckube_clock_now(s->clock) + CKUBE_MS(50));
    bool go = !s->stopping;
    pthread_mutex_unlock(&s->mu);
    if (go) {
        if (ckube_controller_start(s->ctl, 0) != 0)
            CKUBE_ERROR("%s controller: cannot start", s->name);
        else
            CKUBE_INFO("%s controller: started", s->name);
    }
    return NULL;
}

int sync_start_run(sync_start *s)
{
    if (s->running)
        return -1;
    if (pthread_create(&s->tid, NULL, wait_then_start, s) != 0)
        return -1;
    s->running = true;
    return 0;
}

void sync_start_stop(sync_start *s)
{
    pthread_mutex_lock(&s->mu);
    s->stopping = true;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->mu);
    if (s->running) {
        pthread_join(s->tid, NULL);
        s->running = false;
    }
    ckube_controller_stop(s->ctl);
}

void sync_start_destroy(sync_start *s)
{
    sync_start_stop(s);
    pthread_cond_destroy(&s->cond);
    pthread_mutex_destroy(&s->mu);
}
