/* netaddr.h - IP addresses and CIDR prefixes of Network specs.
 *
 * A Network's spec names a CIDR ("192.168.0.0/16") and a gateway inside
 * it ("192.168.0.1"). This module parses and checks them the way the
 * controller needs: IPv4 and IPv6, strict (a CIDR with host bits set is
 * refused with the network address it probably meant), and answers
 * containment and overlap. Pure functions, no allocation except the error
 * strings they return (caller frees).
 */
#ifndef NETCTL_NETADDR_H
#define NETCTL_NETADDR_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NETADDR_STRLEN 64 /* enough for any "addr/len" text, with room */

typedef struct netaddr {
    int family;       /* AF_INET or AF_INET6 */
    uint8_t addr[16]; /* network byte order; IPv4 uses the first 4 */
} netaddr;

typedef struct netaddr_prefix {
    netaddr net;
    int len; /* prefix length: 0..32 or 0..128 */
} netaddr_prefix;

/* Sets *err (when err is not NULL) to a malloc'd formatted message and
 * returns -1: the one error helper of this program's modules. */
int netctl_set_err(char **err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Parses a literal IPv4 or IPv6 address. Returns 0, or -1 with *err
 * (malloc'd) saying why. */
int netaddr_parse_ip(const char *s, netaddr *out, char **err);

/* Parses "address/length". Refuses host bits set past the length. */
int netaddr_parse_prefix(const char *s, netaddr_prefix *out, char **err);

/* True when `a` lies inside `p` (same family). */
bool netaddr_prefix_contains(const netaddr_prefix *p, const netaddr *a);

/* True when the two prefixes share at least one address. */
bool netaddr_prefix_overlaps(const netaddr_prefix *a, const netaddr_prefix *b);

/* True when a and b are the same address. */
bool netaddr_equal(const netaddr *a, const netaddr *b);

/* Writes the address (or "address/len") as text into buf (>= NETADDR_STRLEN). */
const char *netaddr_format(const netaddr *a, char *buf, size_t n);
const char *netaddr_format_prefix(const netaddr *a, int len, char *buf, size_t n);

/* Checks a Network spec: a valid CIDR, a gateway of the same family
 * inside it that is neither its network address nor (IPv4, length < 31)
 * its broadcast address. On success fills *cidr and *gw and returns 0;
 * otherwise -1 with *err (malloc'd), worded for a user reading status. */
int netaddr_check_spec(const char *cidr, const char *gateway, netaddr_prefix *cidr_out,
                       netaddr *gw_out, char **err);

#endif
