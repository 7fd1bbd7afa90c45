/* Fuzzes request path parsing: any bytes as a path with every method. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "apiserver/endpoints/request/request_info.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const methods[] = {"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"};
    char *path = malloc(size + 1);
    if (!path)
        return 0;
    memcpy(path, data, size);
    path[size] = 0;
    for (size_t m = 0; m < sizeof methods / sizeof *methods; m++) {
        request_info ri;
        if (request_info_parse(path, methods[m], size & 1, &ri) == 0 && ri.is_resource) {
            /* Every parsed field is a NUL-terminated string within bounds. */
            if (strlen(ri.resource) >= sizeof ri.resource || !*ri.resource)
                abort();
        }
    }
    free(path);
    return 0;
}
