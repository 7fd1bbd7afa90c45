/* One cluster identity for several servers (identity.h), with OpenSSL 3
 * and jansson. */
#include "apiserver/pki/identity.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/rand.h>

#include "common/text.h"
#include "common/xalloc.h"

#define MAGIC "ckube-identity-v1:"
#define SALT_LEN 16
#define NONCE_LEN 12
#define TAG_LEN 16
#define KEY_LEN 32
/* PBKDF2 rounds: a token is 256 random bits, so this is no password
 * stretching, but a user may choose a weaker --token. */
#define KDF_ROUNDS 100000
#define FILE_MAX (1u << 20)

/* The shared files, whether each is a secret (written 0600), and
 * whether it may be absent: the front proxy's CA joined the identity
 * after the first releases that shared one, so identities sealed then
 * lack it, and a server that made its own before sharing it takes the
 * cluster's (its front-proxy client certificate is then made again). */
static const struct {
    const char *name;
    bool secret, optional;
} FILES[] = {{"ca.crt", false, false},
             {"ca.key", true, false},
             {"sa.key", true, false},
             {"sa.pub", false, false},
             {"front-proxy-ca.crt", false, true},
             {"front-proxy-ca.key", true, true}};
#define NFILES (sizeof FILES / sizeof *FILES)

char *identity_token_new(void)
{
    unsigned char r[32];
    if (RAND_bytes(r, sizeof r) != 1)
        return NULL;
    char *t = xmalloc(2 * sizeof r + 1);
    for (size_t i = 0; i < sizeof r; i++)
        snprintf(t + 2 * i, 3, "%02x", r[i]);
    return t;
}

/* ---- files ---- */

/* The whole of `path` (NUL-terminated, malloc'd) or NULL: *missing when
 * it does not exist, else *err. */
static char *read_all(const char *path, size_t *len, bool *missing, char **err)
{
    *missing = false;
    FILE *f = fopen(path, "rb");
    if (!f) {
        if (errno == ENOENT)
            *missing = true;
        else
            ckube__set_err(err, "cannot open %s: %s", path, strerror(errno));
        return NULL;
    }
    char *buf = xmalloc(FILE_MAX + 1);
    size_t n = fread(buf, 1, FILE_MAX + 1, f);
    bool bad = ferror(f) || n > FILE_MAX;
    fclose(f);
    if (bad) {
        ckube__set_err(err, "cannot read %s (or larger than 1 MiB)", path);
        free(buf);
        return NULL;
    }
    buf[n] = 0;
    *len = n;
    return buf;
}

/* Writes data to path (mode) through a temporary file, fsync'd and renamed. */
static int write_file(const char *path, const char *data, size_t len, mode_t mode, char **err)
{
    char *tmp = xasprintf("%s.tmp", path);
    int rc = -1;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (fd < 0) {
        ckube__set_err(err, "cannot create %s: %s", tmp, strerror(errno));
        goto out;
    }
    bool ok = fchmod(fd, mode) == 0 && write(fd, data, len) == (ssize_t)len && fsync(fd) == 0;
    int e = errno;
    close(fd);
    if (!ok || rename(tmp, path) != 0) {
        ckube__set_err(err, "cannot write %s: %s", path, strerror(ok ? errno : e));
        unlink(tmp);
        goto out;
    }
    rc = 0;
out:
    free(tmp);
    return rc;
}

/* ---- crypto ---- */

static bool derive(const char *token, const unsigned char *salt, unsigned char key[KEY_LEN])
{
    return PKCS5_PBKDF2_HMAC(token, (int)strlen(token), salt, SALT_LEN, KDF_ROUNDS, EVP_sha256(),
                             KEY_LEN, key) == 1;
}

/* AES-256-GCM of in[0..n) into out (n bytes) with the tag; true on success. */
static bool gcm(bool encrypt, const unsigned char *key, const unsigned char *nonce,
                const unsigned char *in, int n, unsigned char *out, unsigned char *tag)
{
    EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
    int len = 0, fin = 0;
    bool ok = c && EVP_CipherInit_ex(c, EVP_aes_256_gcm(), NULL, NULL, NULL, encrypt) == 1 &&
              EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_IVLEN, NONCE_LEN, NULL) == 1 &&
              EVP_CipherInit_ex(c, NULL, NULL, key, nonce, encrypt) == 1 &&
              EVP_CipherUpdate(c, out, &len, in, n) == 1 &&
              (encrypt || EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_TAG, TAG_LEN, tag) == 1) &&
              EVP_CipherFinal_ex(c, out + len, &fin) == 1 &&
              (!encrypt || EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, TAG_LEN, tag) == 1);
    EVP_CIPHER_CTX_free(c);
    return ok;
}

/* ---- seal ---- */

/* The files of dir as a JSON text, or NULL with *err. */
static char *files_json(const char *dir, char **err)
{
    json_t *o = json_object();
    for (size_t i = 0; i < NFILES; i++) {
        char *path = xasprintf("%s/%s", dir, FILES[i].name);
        size_t len = 0;
        bool missing;
        char *data = read_all(path, &len, &missing, err);
        if (!data && missing && FILES[i].optional) {
            free(path);
            continue;
        }
        if (!data && missing)
            ckube__set_err(err, "%s is missing: the cluster identity needs it", path);
        free(path);
        if (!data) {
            json_decref(o);
            return NULL;
        }
        json_object_set_new(o, FILES[i].name, json_stringn(data, len));
        free(data);
    }
    char *text = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(o);
    if (!text)
        ckube__set_err(err, "the identity files are not text");
    return text;
}

int identity_seal(const char *dir, const char *token, char **blob, size_t *blen, char **err)
{
    *blob = NULL;
    *blen = 0;
    char *plain = files_json(dir, err);
    if (!plain)
        return -1;
    int n = (int)strlen(plain);
    size_t raw_len = SALT_LEN + NONCE_LEN + TAG_LEN + (size_t)n;
    unsigned char *raw = xmalloc(raw_len);
    unsigned char *salt = raw, *nonce = raw + SALT_LEN, *tag = nonce + NONCE_LEN,
                  *ct = tag + TAG_LEN, key[KEY_LEN];
    int rc = -1;
    if (RAND_bytes(salt, SALT_LEN + NONCE_LEN) != 1 || !derive(token, salt, key) ||
        !gcm(true, key, nonce, (const unsigned char *)plain, n, ct, tag)) {
        ckube__set_err(err, "cannot encrypt the cluster identity");
        goto out;
    }
    size_t mlen = strlen(MAGIC), b64 = 4 * ((raw_len + 2) / 3);
    char *out = xmalloc(mlen + b64 + 1);
    memcpy(out, MAGIC, mlen);
    EVP_EncodeBlock((unsigned char *)out + mlen, raw, (int)raw_len);
    *blob = out;
    *blen = mlen + b64;
    rc = 0;
out:
    OPENSSL_cleanse(key, sizeof key);
    OPENSSL_cleanse(plain, (size_t)n);
    free(plain);
    free(raw);
    return rc;
}

/* ---- unseal ---- */

/* The JSON object sealed in blob, or NULL with *err. */
static json_t *open_blob(const char *token, const char *blob, size_t len, char **err)
{
    size_t mlen = strlen(MAGIC);
    if (len < mlen || memcmp(blob, MAGIC, mlen) || (len - mlen) % 4) {
        ckube__set_err(err, "the datastore's cluster identity is not in a form this server reads");
        return NULL;
    }
    size_t b64 = len - mlen;
    unsigned char *raw = xmalloc(b64 + 1);
    int got = EVP_DecodeBlock(raw, (const unsigned char *)blob + mlen, (int)b64);
    /* EVP_DecodeBlock counts the padding's zero bytes: take them off */
    if (got >= 0 && b64 >= 1 && blob[len - 1] == '=')
        got--;
    if (got >= 0 && b64 >= 2 && blob[len - 2] == '=')
        got--;
    json_t *o = NULL;
    if (got < SALT_LEN + NONCE_LEN + TAG_LEN) {
        ckube__set_err(err, "the datastore's cluster identity is damaged");
        free(raw);
        return NULL;
    }
    unsigned char *salt = raw, *nonce = raw + SALT_LEN, *tag = nonce + NONCE_LEN,
                  *ct = tag + TAG_LEN, key[KEY_LEN];
    int n = got - (SALT_LEN + NONCE_LEN + TAG_LEN);
    unsigned char *plain = xmalloc((size_t)n + 1);
    if (!derive(token, salt, key) || !gcm(false, key, nonce, ct, n, plain, tag)) {
        ckube__set_err(err, "the token does not open the cluster identity in the datastore: "
                            "give this server the first server's token (its DATA_DIR/token) "
                            "with --token-file or --token");
    } else {
        json_error_t je;
        o = json_loadb((const char *)plain, (size_t)n, 0, &je);
        if (!json_is_object(o)) {
            json_decref(o);
            o = NULL;
            ckube__set_err(err, "the datastore's cluster identity is damaged");
        }
    }
    OPENSSL_cleanse(key, sizeof key);
    OPENSSL_cleanse(plain, (size_t)n);
    free(plain);
    free(raw);
    return o;
}

int identity_unseal(const char *dir, const char *token, const char *blob, size_t len, bool replace,
                    bool *changed, char **err)
{
    *changed = false;
    json_t *o = open_blob(token, blob, len, err);
    if (!o)
        return -1;
    int rc = -1;
    /* Check everything before writing anything. */
    bool write[NFILES] = {false};
    for (size_t i = 0; i < NFILES; i++) {
        json_t *v = json_object_get(o, FILES[i].name);
        if (!v && FILES[i].optional)
            continue;
        if (!json_is_string(v)) {
            ckube__set_err(err, "the datastore's cluster identity has no %s", FILES[i].name);
            goto out;
        }
        char *path = xasprintf("%s/%s", dir, FILES[i].name);
        size_t have_len = 0;
        bool missing;
        char *have = read_all(path, &have_len, &missing, err);
        bool same = have && have_len == json_string_length(v) &&
                    !memcmp(have, json_string_value(v), have_len);
        free(have);
        if (!have && !missing) {
            free(path);
            goto out;
        }
        if (!missing && !same && !replace && !FILES[i].optional) {
            ckube__set_err(err,
                           "%s is not the cluster's (the datastore holds another cluster "
                           "identity): move %s away to join the cluster, or point this server "
                           "at its own datastore",
                           path, dir);
            free(path);
            goto out;
        }
        write[i] = !same;
        free(path);
    }
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        ckube__set_err(err, "cannot create %s: %s", dir, strerror(errno));
        goto out;
    }
    for (size_t i = 0; i < NFILES; i++) {
        if (!write[i])
            continue;
        json_t *v = json_object_get(o, FILES[i].name);
        char *path = xasprintf("%s/%s", dir, FILES[i].name);
        int w = write_file(path, json_string_value(v), json_string_length(v),
                           FILES[i].secret ? 0600 : 0644, err);
        free(path);
        if (w != 0)
            goto out;
        *changed = true;
    }
    rc = 0;
out:
    json_decref(o);
    return rc;
}
