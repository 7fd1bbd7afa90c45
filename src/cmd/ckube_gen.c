/* ckube-gen: typed C code from CRDs (docs/ckube-gen.md).
 *
 *   ckube-gen --package NAME --out DIR INPUT...
 *
 * writes DIR/NAME.h and DIR/NAME.c. An INPUT is a file of CRDs (YAML or
 * JSON, any number of documents) or a directory, whose *.yaml, *.yml and
 * *.json files are read in name order. Nothing is written unless every
 * input is good; errors name the file, the CRD, the version and the path. */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gen/emit.h"
#include "gen/model.h"

static void usage(FILE *f)
{
    fputs("Usage: ckube-gen --package NAME --out DIR INPUT...\n"
          "\n"
          "Writes DIR/NAME.h and DIR/NAME.c: a C struct for every served version of\n"
          "every CustomResourceDefinition in the inputs, with decode, encode, copy,\n"
          "defaults and free, and NAME_add_to_scheme (see <ckube/typed.h> and\n"
          "<ckube/scheme.h>).\n"
          "\n"
          "  --package NAME  the prefix of every generated name: a C identifier in\n"
          "                  snake case (samplecrd)\n"
          "  --out DIR       where the files go (it must exist)\n"
          "  INPUT           a file of CRDs (YAML or JSON, any number of documents),\n"
          "                  or a directory of *.yaml, *.yml and *.json files\n"
          "  -h, --help      this text\n",
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

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"package", required_argument, NULL, 'p'},
        {"out", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {0},
    };
    const char *package = NULL, *out = NULL;
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'p':
            package = optarg;
            break;
        case 'o':
            out = optarg;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (!package || !out || optind == argc) {
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
    for (int i = optind; !rc && i < argc; i++) {
        struct stat is;
        if (!stat(argv[i], &is) && S_ISDIR(is.st_mode))
            rc = add_dir(m, argv[i], &err);
        else
            rc = gen_model_add_file(m, argv[i], &err);
    }
    if (!rc && !m->nkinds) {
        rc = -1;
        if (asprintf(&err, "the inputs hold no CustomResourceDefinition") < 0)
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
