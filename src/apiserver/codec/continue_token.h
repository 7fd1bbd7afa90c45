/* continue_token.h - opaque list continuation tokens.
 *
 * Byte-compatible with upstream's storage.EncodeContinue/DecodeContinue
 * (k8s.io/apiserver/pkg/storage/continue.go): the token is the unpadded
 * base64url encoding (RFC 4648 section 5, no '=') of the JSON object
 *   {"v":"meta.k8s.io/v1","rv":<list revision>,"start":"<key suffix>"}
 * where the key suffix is the storage key of the next item relative to the
 * listed prefix (e.g. "ns1/cm-b" under "/configmaps/"). JSON is written as
 * Go's encoding/json does (including its \u003c-style HTML escaping).
 */
#ifndef CKUBE_CONTINUE_TOKEN_H
#define CKUBE_CONTINUE_TOKEN_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CONTINUE_TOKEN_VERSION "meta.k8s.io/v1"

/* Encodes a token. `start_key_suffix` is borrowed. Returns a malloc'd
 * token (caller frees), or NULL on allocation failure. */
char *continue_token_encode(int64_t rv, const char *start_key_suffix);

/* Decodes and validates a token: base64url (no padding; CR/LF ignored as
 * Go does), a JSON object, version "meta.k8s.io/v1", rv != 0 (a negative
 * rv, as upstream writes -1, asks for the rest of a list at the current
 * revision: an inconsistent continuation), and a
 * non-empty start key that is already clean: relative (no leading '/'), no
 * empty, "." or ".." segments, no trailing '/'. So the key can be appended
 * to a list prefix without ever leaving it.
 * On success returns 0, sets *rv and *start (malloc'd; caller frees).
 * On error returns -1 and, if err is non-NULL, sets *err to a malloc'd
 * message worded like upstream, e.g. "continue key is not valid: ..."
 * (caller frees); *start is left NULL. A caller answers such errors with
 * 400 BadRequest. */
int continue_token_decode(const char *tok, int64_t *rv, char **start, char **err);

#ifdef __cplusplus
}
#endif
#endif
