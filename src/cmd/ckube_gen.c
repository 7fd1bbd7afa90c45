/* ckube-gen: typed C code from CRDs (docs/ckube-gen.md).
 *
 *   ckube-gen --package NAME --out DIR [--kinds K,...] [--openapi PATH
 *             [--kubeconfig FILE]] INPUT...
 *
 * writes DIR/NAME.h and DIR/NAME.c. An INPUT is a file of CRDs or OpenAPI
 * v3 documents (YAML or JSON, any number of documents) or a directory,
 * whose *.yaml, *.yml and *.json files are read in name order; --openapi
 * fetches a document from a server (kubectl's kubeconfig rules). Nothing
 * is written unless every input is good; errors name the file, the CRD or
 * definition, the version and the path. */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ckube/client.h"
#include "ckube/config.h"
#include "gen/emit.h"
#include "gen/model.h"

static void usage(FILE *f)
{
    fputs("Usage: ckube-gen --package NAME --out DIR [--kinds K,...]\n"
          "                 [--openapi PATH [--kubeconfig FILE]] [INPUT...]\n"
          "\n"
          "Writes DIR/NAME.h and DIR/NAME.c: a C struct for every served version of\n"
          "every CustomResourceDefinition and every kind of the OpenAPI documents in\n"
          "the inputs, with decode, encode, copy, defaults and free, a typed client,\n"
          "informer and lister views, and NAME_add_to_scheme (<ckube/typed.h>,\n"
          "<ckube/typed_client.h>, <ckube/scheme.h>).\n"
          "\n"
          "  --package NAME    the prefix of every generated name: a C identifier in\n"
          "                    snake case (samplecrd)\n"
          "  --out DIR         where the files go (it must exist)\n"
          "  --kinds K,...     of OpenAPI documents, only these kinds (Pod,ConfigMap)\n"
          "  --openapi PATH    fetch an OpenAPI v3 document from the server, e.g.\n"
          "                    /openapi/v3/api/v1 or /openapi/v3/apis/apps/v1\n"
          "  --kubeconfig FILE the server's (default: $KUBECONFIG, ~/.kube/config)\n"
          "  INPUT             a file of CRDs or OpenAPI v3 documents (YAML or JSON,\n"
          "                    any number of documents), or a directory of *.yaml,\n"
          "                    *.yml and *.json files\n"
          "  -h, --help        this text\n",
          f);
}

static bool input_name(const char *name)
{
    size_t n = strlen(name);
    const char *exts[] = {".yaml", ".yml", ".json"};
    for (size_t i = 0; i < 3; i++) {
        size_t e = strlen(exts[i]);
        if (n > e && !strcmp(name + n - e, exts[i]) && name[0] != '.')
            return true;
    }
    return false;
}

static int add_dir(gen_model *m, const char *dir, char **err)
{
    struct dirent **ents = NULL;
    int n = scandir(dir, &ents, NULL, alphasort);
    if (n < 0) {
        if (asprintf(err, "%s: cannot read the directory: %s", dir, strerror(errno)) < 0)
            *err = NULL;
        return -1;
    }
    int rc = 0, found = 0;
    for (int i = 0; i < n; i++) {
        if (!rc && input_name(ents[i]->d_name)) {
            char *path = NULL;
            if (asprintf(&path, "%s/%s", dir, ents[i]->d_name) < 0) {
                rc = -1;
            } else {
                rc = gen_model_add_file(m, path, err);
                found++;
            }
            free(path);
        }
        free(ents[i]);
    }
    free(ents);
    if (!rc && !found && asprintf(err, "%s: no *.yaml, *.yml or *.json file in it", dir) >= 0)
        rc = -1;
    return rc;
}

/* GET path from the server of the kubeconfig, as a decoded document. */
static int add_fetched(gen_model *m, const char *kubeconfig, const char *path, char **err)
{
    ckube_config_overrides ov = {.kubeconfig = kubeconfig};
    ckube_config *cfg = NULL;
    ckube_status *st = NULL;
    ckube_client *c = NULL;
    if (ckube_config_load(&ov, &cfg, &st) == 0)
        c = ckube_client_new(cfg, &st);
    ckube_config_free(cfg);
    ckube_response resp = {0};
    ckube_request rq = {.method = "GET", .path = path};
    int rc = c ? ckube_client_do(c, &rq, &resp, &st) : -1;
    json_t *doc = NULL;
    json_error_t je;
    if (!rc && !(doc = json_loadb(resp.body, resp.body_len, 0, &je)))
        st = ckube_status_new(0, NULL, "not JSON: %s", je.text);
    if (st) {
        if (asprintf(err, "--openapi %s: %s", path, st->message ? st->message : "failed") < 0)
            *err = NULL;
        rc = -1;
    } else {
        char *source = NULL;
        if (asprintf(&source, "%s%s", ckube_client_host(c), path) < 0)
            source = NULL;
        rc = source ? gen_model_add_openapi(m, doc, source, err) : -1;
        free(source);
    }
    ckube_status_free(st);
    json_decref(doc);
    ckube_response_free(&resp);
    ckube_client_free(c);
    return rc;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"package", required_argument, NULL, 'p'},
        {"out", required_argument, NULL, 'o'},
        {"kinds", required_argument, NULL, 'k'},
        {"openapi", required_argument, NULL, 'a'},
        {"kubeconfig", required_argument, NULL, 'c'},
        {"help", no_argument, NULL, 'h'},
        {0},
    };
    const char *package = NULL, *out = NULL, *kinds = NULL, *kubeconfig = NULL;
    const char *fetch[16];
    size_t nfetch = 0;
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'p':
            package = optarg;
            break;
        case 'o':
            out = optarg;
            break;
        case 'k':
            kinds = optarg;
            break;
        case 'c':
            kubeconfig = optarg;
            break;
        case 'a':
            if (nfetch == sizeof fetch / sizeof *fetch) {
                fprintf(stderr, "ckube-gen: at most %zu --openapi\n", nfetch);
                return 2;
            }
            fetch[nfetch++] = optarg;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (!package || !out || (optind == argc && !nfetch)) {
        fprintf(stderr, "ckube-gen: %s\n",
                !package ? "--package is required"
                : !out   ? "--out is required"
                         : "no INPUT: name at least one file or directory of CRDs");
        usage(stderr);
        return 2;
    }
    struct stat st;
    if (stat(out, &st) || !S_ISDIR(st.st_mode)) {
        fprintf(stderr, "ckube-gen: --out %s: %s\n", out,
                S_ISDIR(st.st_mode) || errno != ENOENT ? strerror(errno ? errno : ENOTDIR)
                                                       : "no such directory");
        return 1;
    }
    char *err = NULL;
    gen_model *m = gen_model_new(package, &err);
    int rc = m ? 0 : -1;
    if (!rc && kinds)
        rc = gen_model_set_kinds(m, kinds, &err);
    for (size_t i = 0; !rc && i < nfetch; i++)
        rc = add_fetched(m, kubeconfig, fetch[i], &err);
    for (int i = optind; !rc && i < argc; i++) {
        struct stat is;
        if (!stat(argv[i], &is) && S_ISDIR(is.st_mode))
            rc = add_dir(m, argv[i], &err);
        else
            rc = gen_model_add_file(m, argv[i], &err);
    }
    if (!rc)
        rc = gen_model_check_kinds(m, &err);
    if (!rc && !m->nkinds) {
        rc = -1;
        if (asprintf(&err, "the inputs hold no CustomResourceDefinition and no OpenAPI kind") < 0)
            err = NULL;
    }
    if (!rc)
        rc = gen_write(m, out, &err);
    if (rc)
        fprintf(stderr, "ckube-gen: %s\n", err ? err : "out of memory");
    free(err);
    gen_model_free(m);
    return rc ? 1 : 0;
}
