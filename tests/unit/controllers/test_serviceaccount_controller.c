/* test_serviceaccount_controller.c - the service account controller
 * against a real `ckube server` without its own controller-manager:
 * namespaces that exist at start and new ones get a "default"
 * ServiceAccount, a deleted one is made again, one made by someone else
 * is left as it is, and a Terminating namespace gets nothing. */
#include <ckube/client.h>
#include <ckube/config.h>
#include <ckube/informer.h>
#include <ckube/json.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "controllers/serviceaccount.h"
#include "util/server_util.h"

static const ckube_gvr NAMESPACES = {"", "v1", "namespaces"};
static const ckube_gvr SAS = {"", "v1", "serviceaccounts"};

static struct test_server srv;
static ckube_client *client;

static int group_setup(void **state)
{
    (void)state;
    srv.no_controller_manager = true;
    if (tsu_start(&srv, "memory") != 0)
        return -1;
    client = tsu_client(&srv);
    return client ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    ckube_client_free(client);
    return tsu_stop(&srv, SIGTERM) == 0 ? 0 : -1;
}

static void create_namespace(const char *name, bool with_finalizer)
{
    json_t *ns = json_pack("{s:s,s:s,s:{s:s}}", "apiVersion", "v1", "kind", "Namespace", "metadata",
                           "name", name);
    if (with_finalizer)
        json_object_set_new(json_object_get(ns, "metadata"), "finalizers",
                            json_pack("[s]", "example.com/hold"));
    ckube_status *err = NULL;
    assert_int_equal(ckube_create(client, &NAMESPACES, NULL, ns, NULL, NULL, &err), 0);
    json_decref(ns);
}

/* The uid of ns/default (malloc'd), or NULL when there is none. */
static char *sa_uid(const char *ns)
{
    json_t *sa = NULL;
    ckube_status *err = NULL;
    if (ckube_get(client, &SAS, ns, "default", &sa, &err) != 0) {
        assert_true(ckube_is_not_found(err));
        ckube_status_free(err);
        return NULL;
    }
    char *uid = strdup(ckube_obj_uid(sa));
    json_decref(sa);
    return uid;
}

/* Waits (up to 10 s) for ns/default with a uid other than `old_uid`
 * (NULL: any); returns its uid (malloc'd) or NULL. */
static char *wait_sa(const char *ns, const char *old_uid)
{
    for (int i = 0; i < 200; i++) {
        char *uid = sa_uid(ns);
        if (uid && (!old_uid || strcmp(uid, old_uid) != 0))
            return uid;
        free(uid);
        usleep(50000);
    }
    return NULL;
}

static void delete_sa(const char *ns)
{
    ckube_status *err = NULL;
    assert_int_equal(ckube_delete(client, &SAS, ns, "default", NULL, NULL, &err), 0);
}

static void test_default_accounts(void **state)
{
    (void)state;
    create_namespace("before", false);
    /* a user's own "default", made before the controller runs, stays */
    json_t *mine =
        json_pack("{s:s,s:s,s:{s:s,s:{s:s}}}", "apiVersion", "v1", "kind", "ServiceAccount",
                  "metadata", "name", "default", "labels", "owner", "me");
    ckube_status *err = NULL;
    create_namespace("mine", false);
    assert_int_equal(ckube_create(client, &SAS, "mine", mine, NULL, NULL, &err), 0);
    json_decref(mine);
    char *mine_uid = sa_uid("mine");
    assert_non_null(mine_uid);
    /* without the controller nothing makes them */
    char *none = sa_uid("before");
    assert_null(none);

    ckube_informer_factory *f = ckube_informer_factory_new(client, NULL);
    sactl *s = sactl_new(client, f, NULL);
    assert_non_null(s);
    assert_int_equal(ckube_informer_factory_start(f), 0);
    assert_int_equal(sactl_start(s), 0);
    assert_int_equal(sactl_start(s), -1); /* only once */

    const char *existing[] = {"default", "kube-system", "kube-public", "before"};
    for (size_t i = 0; i < sizeof existing / sizeof *existing; i++) {
        char *uid = wait_sa(existing[i], NULL);
        if (!uid)
            fail_msg("no default ServiceAccount in %s", existing[i]);
        free(uid);
    }
    create_namespace("after", false);
    char *uid1 = wait_sa("after", NULL);
    assert_non_null(uid1);

    /* deleted: made again (a new object) */
    delete_sa("after");
    char *uid2 = wait_sa("after", uid1);
    assert_non_null(uid2);
    json_t *sa = NULL;
    assert_int_equal(ckube_get(client, &SAS, "after", "default", &sa, &err), 0);
    assert_string_equal(json_string_value(ckube_json_get_path(sa, "metadata.name")), "default");
    json_decref(sa);

    /* the user's account was not replaced */
    char *still = sa_uid("mine");
    assert_non_null(still);
    assert_string_equal(still, mine_uid);

    /* a Terminating namespace (held by a finalizer nobody removes) gets
     * nothing back */
    create_namespace("going", true);
    char *g = wait_sa("going", NULL);
    assert_non_null(g);
    assert_int_equal(ckube_delete(client, &NAMESPACES, NULL, "going", NULL, NULL, &err), 0);
    delete_sa("going");
    usleep(1000000);
    char *back = sa_uid("going");
    assert_null(back);

    sactl_stop(s);
    sactl_stop(s); /* idempotent */
    /* stopped: a deletion is not answered any more */
    delete_sa("before");
    usleep(500000);
    char *after_stop = sa_uid("before");
    assert_null(after_stop);

    sactl_free(s);
    ckube_informer_factory_free(f);
    free(mine_uid);
    free(still);
    free(uid1);
    free(uid2);
    free(g);
}

static void test_bad_arguments(void **state)
{
    (void)state;
    ckube_informer_factory *f = ckube_informer_factory_new(client, NULL);
    assert_null(sactl_new(NULL, f, NULL));
    assert_null(sactl_new(client, NULL, NULL));
    assert_int_equal(sactl_start(NULL), -1);
    sactl_stop(NULL);
    sactl_free(NULL);
    ckube_informer_factory_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_accounts),
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
