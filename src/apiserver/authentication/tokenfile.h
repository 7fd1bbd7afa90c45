/* tokenfile.h - the static token file (--token-auth-file), as
 * kube-apiserver reads it (k8s.io/apiserver/.../token/tokenfile): CSV
 * records "token,user name,user uid" with an optional fourth column of
 * groups ("group1,group2", quoted). Read once at start.
 *
 * CSV as Go's encoding/csv reads it: fields may be quoted ("" is a quote
 * inside one, and a quoted field may hold commas and newlines), a quote
 * inside an unquoted field is an error, blank lines are skipped, CRLF
 * ends a line as LF does. A record with fewer than three fields is an
 * error; an empty token is skipped with a warning; a token seen twice is
 * the later record's, with a warning.
 */
#ifndef CKUBE_APISERVER_AUTHENTICATION_TOKENFILE_H
#define CKUBE_APISERVER_AUTHENTICATION_TOKENFILE_H

#include <stddef.h>

#include "apiserver/authentication/user.h"

typedef struct tokenfile tokenfile;

/* Parses the contents of a token file (`data`, `len` bytes; `path` names
 * it in messages). NULL with *err (malloc'd) on a malformed file. */
tokenfile *tokenfile_parse(const char *path, const char *data, size_t len, char **err);

/* Reads and parses the file at `path`. NULL with *err. */
tokenfile *tokenfile_load(const char *path, char **err);

/* The user of `token` (a new reference), or NULL if it is not in the
 * file. Thread-safe (the table is only read). */
auth_user *tokenfile_lookup(const tokenfile *t, const char *token);

/* How many tokens the file holds. */
size_t tokenfile_count(const tokenfile *t);

void tokenfile_free(tokenfile *t);

#endif
