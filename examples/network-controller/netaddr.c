/* netaddr.c - see netaddr.h. */
#include "netaddr.h"

#include <arpa/inet.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

int netctl_set_err(char **err, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        if (vasprintf(err, fmt, ap) < 0)
            *err = NULL;
        va_end(ap);
    }
    return -1;
}

static int max_len(int family)
{
    return family == AF_INET ? 32 : 128;
}

int netaddr_parse_ip(const char *s, netaddr *out, char **err)
{
    memset(out, 0, sizeof(*out));
    if (!s || !*s)
        return netctl_set_err(err, "empty IP address");
    if (strchr(s, ':')) {
        if (inet_pton(AF_INET6, s, out->addr) != 1)
            return netctl_set_err(err, "%s is not a valid IPv6 address", s);
        out->family = AF_INET6;
        return 0;
    }
    /* inet_pton refuses the odd forms inet_aton takes ("10.1", octal),
     * which is what a Kubernetes user expects (netip.ParseAddr). */
    if (inet_pton(AF_INET, s, out->addr) != 1)
        return netctl_set_err(err, "%s is not a valid IPv4 address", s);
    out->family = AF_INET;
    return 0;
}

/* Clears the bits of `a` past `len`; returns true if any was set. */
static bool mask_host_bits(netaddr *a, int len)
{
    bool had = false;
    int bytes = max_len(a->family) / 8;
    for (int i = 0; i < bytes; i++) {
        int keep = len - i * 8;
        uint8_t mask = keep >= 8 ? 0xff : keep <= 0 ? 0 : (uint8_t)(0xff << (8 - keep));
        if (a->addr[i] & (uint8_t)~mask)
            had = true;
        a->addr[i] &= mask;
    }
    return had;
}

int netaddr_parse_prefix(const char *s, netaddr_prefix *out, char **err)
{
    memset(out, 0, sizeof(*out));
    const char *slash = s ? strchr(s, '/') : NULL;
    if (!slash)
        return netctl_set_err(err, "%s is not in CIDR notation (address/length)", s ? s : "(null)");
    char ip[NETADDR_STRLEN];
    size_t n = (size_t)(slash - s);
    if (n == 0 || n >= sizeof(ip))
        return netctl_set_err(err, "%s is not a valid CIDR", s);
    memcpy(ip, s, n);
    ip[n] = '\0';
    char *perr = NULL;
    if (netaddr_parse_ip(ip, &out->net, &perr) != 0) {
        int rc = netctl_set_err(err, "%s is not a valid CIDR: %s", s, perr ? perr : "bad address");
        free(perr);
        return rc;
    }
    const char *lp = slash + 1;
    char *end = NULL;
    long len = strtol(lp, &end, 10);
    if (!*lp || *end || lp[0] == '+' || lp[0] == '-' || (lp[0] == '0' && lp[1]) || len < 0 ||
        len > max_len(out->net.family))
        return netctl_set_err(err, "%s is not a valid CIDR: the prefix length must be 0 to %d", s,
                              max_len(out->net.family));
    out->len = (int)len;
    netaddr masked = out->net;
    if (mask_host_bits(&masked, out->len)) {
        char buf[NETADDR_STRLEN];
        return netctl_set_err(err, "%s has host bits set; did you mean %s?", s,
                              netaddr_format_prefix(&masked, out->len, buf, sizeof(buf)));
    }
    return 0;
}

bool netaddr_prefix_contains(const netaddr_prefix *p, const netaddr *a)
{
    if (p->net.family != a->family)
        return false;
    netaddr m = *a;
    mask_host_bits(&m, p->len);
    return memcmp(m.addr, p->net.addr, sizeof(m.addr)) == 0;
}

bool netaddr_prefix_overlaps(const netaddr_prefix *a, const netaddr_prefix *b)
{
    /* Two prefixes overlap exactly when the shorter contains the other's
     * network address. */
    return a->len <= b->len ? netaddr_prefix_contains(a, &b->net)
                            : netaddr_prefix_contains(b, &a->net);
}

bool netaddr_equal(const netaddr *a, const netaddr *b)
{
    return a->family == b->family && memcmp(a->addr, b->addr, sizeof(a->addr)) == 0;
}

const char *netaddr_format(const netaddr *a, char *buf, size_t n)
{
    if (!inet_ntop(a->family, a->addr, buf, (socklen_t)n))
        snprintf(buf, n, "?");
    return buf;
}

const char *netaddr_format_prefix(const netaddr *a, int len, char *buf, size_t n)
{
    char ip[INET6_ADDRSTRLEN];
    snprintf(buf, n, "%s/%d", netaddr_format(a, ip, sizeof(ip)), len & 0xff);
    return buf;
}

/* The IPv4 broadcast address of p. */
static bool is_v4_broadcast(const netaddr_prefix *p, const netaddr *a)
{
    if (a->family != AF_INET || p->len >= 31)
        return false;
    uint32_t net, ip;
    memcpy(&net, p->net.addr, 4);
    memcpy(&ip, a->addr, 4);
    uint32_t host = p->len == 0 ? 0xffffffffu : (0xffffffffu >> p->len);
    return ntohl(ip) == (ntohl(net) | host);
}

int netaddr_check_spec(const char *cidr, const char *gateway, netaddr_prefix *cidr_out,
                       netaddr *gw_out, char **err)
{
    if (!cidr || !*cidr)
        return netctl_set_err(err, "spec.cidr is required");
    if (!gateway || !*gateway)
        return netctl_set_err(err, "spec.gateway is required");
    char *e = NULL;
    if (netaddr_parse_prefix(cidr, cidr_out, &e) != 0) {
        int rc = netctl_set_err(err, "spec.cidr: %s", e ? e : "invalid");
        free(e);
        return rc;
    }
    if (netaddr_parse_ip(gateway, gw_out, &e) != 0) {
        int rc = netctl_set_err(err, "spec.gateway: %s", e ? e : "invalid");
        free(e);
        return rc;
    }
    if (gw_out->family != cidr_out->net.family)
        return netctl_set_err(err, "spec.gateway %s and spec.cidr %s are of different IP families",
                              gateway, cidr);
    if (!netaddr_prefix_contains(cidr_out, gw_out))
        return netctl_set_err(err, "spec.gateway %s is outside spec.cidr %s", gateway, cidr);
    int ml = max_len(gw_out->family);
    if (cidr_out->len < ml - 1 && netaddr_equal(gw_out, &cidr_out->net))
        return netctl_set_err(err, "spec.gateway %s is the network address of %s", gateway, cidr);
    if (is_v4_broadcast(cidr_out, gw_out))
        return netctl_set_err(err, "spec.gateway %s is the broadcast address of %s", gateway, cidr);
    return 0;
}
