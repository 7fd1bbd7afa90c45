/* The schema engine (internal.h): the string formats (kube-openapi's strfmt registry). */
#include "apiserver/apiextensions/schema/internal.h"

static bool all_hex(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isxdigit((unsigned char)s[i]))
            return false;
    return true;
}

static bool digits_n(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isdigit((unsigned char)s[i]))
            return false;
    return true;
}

static int num2(const char *s)
{
    return (s[0] - '0') * 10 + (s[1] - '0');
}

static bool valid_date(const char *s)
{
    if (strlen(s) < 10 || !digits_n(s, 4) || s[4] != '-' || !digits_n(s + 5, 2) || s[7] != '-' ||
        !digits_n(s + 8, 2))
        return false;
    int y = (s[0] - '0') * 1000 + (s[1] - '0') * 100 + num2(s + 2);
    int m = num2(s + 5), d = num2(s + 8);
    static const int mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (m < 1 || m > 12 || d < 1 || d > mdays[m - 1])
        return false;
    if (m == 2 && d == 29 && !((y % 4 == 0 && y % 100 != 0) || y % 400 == 0))
        return false;
    return true;
}

static bool valid_date_time(const char *s)
{
    if (!valid_date(s))
        return false;
    s += 10;
    if (*s != 'T' && *s != 't' && *s != ' ')
        return false;
    s++;
    if (!digits_n(s, 2) || s[2] != ':' || !digits_n(s + 3, 2) || s[5] != ':' || !digits_n(s + 6, 2))
        return false;
    if (num2(s) > 23 || num2(s + 3) > 59 || num2(s + 6) > 60)
        return false;
    s += 8;
    if (*s == '.') {
        s++;
        if (!isdigit((unsigned char)*s))
            return false;
        while (isdigit((unsigned char)*s))
            s++;
    }
    if (*s == 'Z' || *s == 'z')
        return s[1] == 0;
    if (*s == '+' || *s == '-')
        return digits_n(s + 1, 2) && s[3] == ':' && digits_n(s + 4, 2) && s[6] == 0 &&
               num2(s + 1) <= 23 && num2(s + 4) <= 59;
    return *s == 0; /* strfmt also accepts a local time without offset */
}

/* Standard base64 with padding; like Go's decoder, CR and LF are ignored. */
static bool valid_base64(const char *s)
{
    size_t n = 0, pad = 0;
    for (; *s; s++) {
        char c = *s;
        if (c == '\r' || c == '\n')
            continue;
        n++;
        if (c == '=') {
            pad++;
            continue;
        }
        if (pad || !(isalnum((unsigned char)c) || c == '+' || c == '/'))
            return false;
    }
    return n % 4 == 0 && pad <= 2;
}

static bool valid_uuid(const char *s, int version)
{
    if (strlen(s) != 36)
        return false;
    for (int i = 0; i < 36; i++) {
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (s[i] != '-')
                return false;
        } else if (!isxdigit((unsigned char)s[i])) {
            return false;
        }
    }
    if (version && s[14] != '0' + version)
        return false;
    if (version == 4 || version == 5) {
        char v = (char)tolower((unsigned char)s[19]);
        if (v != '8' && v != '9' && v != 'a' && v != 'b')
            return false;
    }
    return true;
}

static bool valid_hostname(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 255)
        return false;
    const char *label = s;
    while (*label) {
        const char *dot = strchr(label, '.');
        size_t len = dot ? (size_t)(dot - label) : strlen(label);
        if (len == 0 || len > 63 || label[0] == '-' || label[len - 1] == '-')
            return false;
        for (size_t i = 0; i < len; i++) {
            unsigned char c = (unsigned char)label[i];
            if (!(isalnum(c) || c == '-' || c >= 0x80))
                return false;
        }
        if (!dot)
            break;
        label = dot + 1;
        if (!*label)
            return false;
    }
    return true;
}

static bool valid_ip(const char *s, int af)
{
    unsigned char buf[sizeof(struct in6_addr)];
    return inet_pton(af, s, buf) == 1;
}

static bool valid_cidr(const char *s)
{
    const char *slash = strchr(s, '/');
    if (!slash || slash == s || !slash[1] || strlen(slash + 1) > 3 ||
        !digits_n(slash + 1, strlen(slash + 1)))
        return false;
    char ip[64];
    size_t n = (size_t)(slash - s);
    if (n >= sizeof ip)
        return false;
    memcpy(ip, s, n);
    ip[n] = 0;
    int bits = atoi(slash + 1);
    if (valid_ip(ip, AF_INET))
        return bits <= 32;
    if (valid_ip(ip, AF_INET6))
        return bits <= 128;
    return false;
}

static bool valid_mac(const char *s)
{
    size_t n = strlen(s);
    if (n != 17)
        return false;
    char sep = s[2];
    if (sep != ':' && sep != '-')
        return false;
    for (size_t i = 0; i < n; i++) {
        if (i % 3 == 2) {
            if (s[i] != sep)
                return false;
        } else if (!isxdigit((unsigned char)s[i])) {
            return false;
        }
    }
    return true;
}

static bool valid_email(const char *s)
{
    const char *at = strchr(s, '@');
    if (!at || at == s || !at[1] || strchr(at + 1, '@'))
        return false;
    for (const char *p = s; *p; p++)
        if (isspace((unsigned char)*p))
            return false;
    return true;
}

bool sch_string_format_ok(const char *format, const char *s)
{
    if (!strcmp(format, "date-time") || !strcmp(format, "datetime"))
        return valid_date_time(s);
    if (!strcmp(format, "date"))
        return strlen(s) == 10 && valid_date(s);
    if (!strcmp(format, "byte"))
        return valid_base64(s);
    if (!strcmp(format, "uuid"))
        return valid_uuid(s, 0);
    if (!strcmp(format, "uuid3"))
        return valid_uuid(s, 3);
    if (!strcmp(format, "uuid4"))
        return valid_uuid(s, 4);
    if (!strcmp(format, "uuid5"))
        return valid_uuid(s, 5);
    if (!strcmp(format, "hostname"))
        return valid_hostname(s);
    if (!strcmp(format, "ipv4"))
        return valid_ip(s, AF_INET);
    if (!strcmp(format, "ipv6"))
        return valid_ip(s, AF_INET6);
    if (!strcmp(format, "cidr"))
        return valid_cidr(s);
    if (!strcmp(format, "mac"))
        return valid_mac(s);
    if (!strcmp(format, "email"))
        return valid_email(s);
    if (!strcmp(format, "bsonobjectid"))
        return strlen(s) == 24 && all_hex(s, 24);
    return true;
}
