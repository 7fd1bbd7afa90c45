/* The structural schema engine: pruning, unknown-field paths, defaulting,
 * every validation keyword with upstream's cause wording, and robustness
 * against malformed schemas. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <regex.h>
#include <string.h>

#include <cmocka.h>

#include "apiserver/registry/definitions/builtin_schemas.h"
#include "apiserver/apiextensions/schema/internal.h"
#include "apiserver/apiextensions/schema/schema.h"

/* Schemas and objects are written with ' for " to keep them legible. */
static json_t *J(const char *text)
{
    char *s = strdup(text);
    assert_non_null(s);
    for (char *p = s; *p; p++)
        if (*p == '\'')
            *p = '"';
    json_error_t err;
    json_t *j = json_loads(s, JSON_DECODE_ANY, &err);
    if (!j)
        fail_msg("bad test JSON %s: %s", text, err.text);
    free(s);
    return j;
}

typedef struct result {
    json_t *obj; /* after the walk */
    ckube_status *st;
    int n;
    char **unknown;
    size_t nunknown;
} result;

static result run_flags(const char *schema, const char *obj, unsigned flags)
{
    result r = {0};
    json_t *s = J(schema);
    r.obj = J(obj);
    r.st = ckube_status_invalid_begin("example.com", "Thing", "x");
    r.n = schema_apply(s, r.obj, flags, r.st, &r.unknown, &r.nunknown);
    json_decref(s);
    assert_int_equal(r.n, (int)r.st->ncauses);
    return r;
}

static result run(const char *schema, const char *obj)
{
    return run_flags(schema, obj, SCHEMA_ALL);
}

static void done(result *r)
{
    json_decref(r->obj);
    ckube_status_free(r->st);
    schema_free_paths(r->unknown, r->nunknown);
}

static void dump_causes(const result *r)
{
    for (size_t i = 0; i < r->st->ncauses; i++)
        fprintf(stderr, "  cause %zu: [%s] %s: %s\n", i, r->st->causes[i].type,
                r->st->causes[i].field, r->st->causes[i].message);
}

/* Asserts exactly one cause with this type, field and message. */
static void expect_one(const char *schema, const char *obj, const char *type, const char *field,
                       const char *message)
{
    result r = run(schema, obj);
    if (r.st->ncauses != 1) {
        dump_causes(&r);
        fail_msg("expected 1 cause for %s, got %zu", obj, r.st->ncauses);
    }
    assert_string_equal(r.st->causes[0].type, type);
    assert_string_equal(r.st->causes[0].field, field);
    assert_string_equal(r.st->causes[0].message, message);
    done(&r);
}

static void expect_valid(const char *schema, const char *obj)
{
    result r = run(schema, obj);
    if (r.n != 0) {
        dump_causes(&r);
        fail_msg("expected %s to be valid", obj);
    }
    done(&r);
}

static void expect_obj(const result *r, const char *want)
{
    json_t *w = J(want);
    if (!json_equal(w, r->obj)) {
        char *got = json_dumps(r->obj, JSON_COMPACT | JSON_SORT_KEYS);
        fail_msg("object is %s, want %s", got, want);
    }
    json_decref(w);
}

#define SPEC(props)                                                                                \
    "{'type':'object','properties':{'spec':{'type':'object','properties':{" props "}}}}"

/* ------------------------------------------------------------ types */

static void test_type_errors(void **state)
{
    (void)state;
    const char *s = SPEC("'replicas':{'type':'integer'},'n':{'type':'number'},"
                         "'b':{'type':'boolean'},'s':{'type':'string'},'a':{'type':'array'},"
                         "'o':{'type':'object'}");
    expect_one(s, "{'spec':{'replicas':'3'}}", "FieldValueTypeInvalid", "spec.replicas",
               "Invalid value: \"string\": spec.replicas in body must be of type integer: "
               "\"string\"");
    expect_one(s, "{'spec':{'replicas':1.5}}", "FieldValueTypeInvalid", "spec.replicas",
               "Invalid value: \"number\": spec.replicas in body must be of type integer: "
               "\"number\"");
    expect_valid(s, "{'spec':{'replicas':2.0,'n':1,'b':false,'s':'','a':[],'o':{}}}");
    expect_one(s, "{'spec':{'n':'1'}}", "FieldValueTypeInvalid", "spec.n",
               "Invalid value: \"string\": spec.n in body must be of type number: \"string\"");
    expect_one(s, "{'spec':{'b':'true'}}", "FieldValueTypeInvalid", "spec.b",
               "Invalid value: \"string\": spec.b in body must be of type boolean: \"string\"");
    expect_one(s, "{'spec':{'s':{}}}", "FieldValueTypeInvalid", "spec.s",
               "Invalid value: \"object\": spec.s in body must be of type string: \"object\"");
    expect_one(s, "{'spec':{'a':{}}}", "FieldValueTypeInvalid", "spec.a",
               "Invalid value: \"object\": spec.a in body must be of type array: \"object\"");
    expect_one(s, "{'spec':[]}", "FieldValueTypeInvalid", "spec",
               "Invalid value: \"array\": spec in body must be of type object: \"array\"");
}

static void test_nullable(void **state)
{
    (void)state;
    const char *s = SPEC("'s':{'type':'string'},'ns':{'type':'string','nullable':true}");
    /* Validation alone reports a null for a non-nullable field... */
    result r = run_flags(s, "{'spec':{'s':null,'ns':null}}", SCHEMA_VALIDATE);
    assert_int_equal(r.n, 1);
    assert_string_equal(r.st->causes[0].field, "spec.s");
    assert_string_equal(r.st->causes[0].message,
                        "Invalid value: \"null\": spec.s in body must be of type string: "
                        "\"null\"");
    done(&r);
    /* ...while defaulting drops it first, as upstream does for CRs. */
    r = run(s, "{'spec':{'s':null,'ns':null}}");
    assert_int_equal(r.n, 0);
    expect_obj(&r, "{'spec':{'ns':null}}");
    done(&r);
}

static void test_int_or_string(void **state)
{
    (void)state;
    const char *s = SPEC("'port':{'x-kubernetes-int-or-string':true}");
    expect_valid(s, "{'spec':{'port':8080}}");
    expect_valid(s, "{'spec':{'port':'http'}}");
    expect_one(s, "{'spec':{'port':true}}", "FieldValueTypeInvalid", "spec.port",
               "Invalid value: \"boolean\": spec.port in body must be of type integer,string: "
               "\"boolean\"");
    expect_one(s, "{'spec':{'port':1.5}}", "FieldValueTypeInvalid", "spec.port",
               "Invalid value: \"number\": spec.port in body must be of type integer,string: "
               "\"number\"");
    /* Combined with a pattern, the pattern applies to strings only. */
    const char *p = SPEC("'pct':{'x-kubernetes-int-or-string':true,'pattern':'^[0-9]+%$'}");
    expect_valid(p, "{'spec':{'pct':'25%'}}");
    expect_valid(p, "{'spec':{'pct':3}}");
    expect_one(p, "{'spec':{'pct':'x'}}", "FieldValueInvalid", "spec.pct",
               "Invalid value: \"x\": spec.pct in body should match '^[0-9]+%$'");
}

/* -------------------------------------------------------- keywords */

static void test_required_and_enum(void **state)
{
    (void)state;
    const char *s = "{'type':'object','properties':{'spec':{'type':'object','required':['a','b'],"
                    "'properties':{'a':{'type':'string','enum':['x','y']},'b':{'type':'integer',"
                    "'enum':[1,2]}}}}}";
    expect_one(s, "{'spec':{'a':'x'}}", "FieldValueRequired", "spec.b", "Required value");
    expect_one(s, "{'spec':{'a':'z','b':1}}", "FieldValueNotSupported", "spec.a",
               "Unsupported value: \"z\": supported values: \"x\", \"y\"");
    expect_one(s, "{'spec':{'a':'x','b':3}}", "FieldValueNotSupported", "spec.b",
               "Unsupported value: 3: supported values: \"1\", \"2\"");
    /* Values are quoted as Go's %q quotes them: a printable rune as it
     * is, a non-printable one (U+200B) escaped. */
    expect_one(s, "{'spec':{'a':'\u00e9\u200b','b':1}}", "FieldValueNotSupported", "spec.a",
               "Unsupported value: \"\u00e9\\u200b\": supported values: \"x\", \"y\"");
    /* 2.0 equals the enum's 2 */
    expect_valid(s, "{'spec':{'a':'y','b':2.0}}");
    result r = run(s, "{'spec':{}}");
    assert_int_equal(r.n, 2);
    assert_string_equal(r.st->causes[0].field, "spec.a");
    assert_string_equal(r.st->causes[1].field, "spec.b");
    done(&r);
    /* Required at the root. */
    expect_one("{'type':'object','required':['spec'],'properties':{'spec':{'type':'object'}}}",
               "{}", "FieldValueRequired", "spec", "Required value");
}

static void test_numbers(void **state)
{
    (void)state;
    const char *s = SPEC("'x':{'type':'integer','minimum':0,'maximum':100},"
                         "'ex':{'type':'integer','minimum':0,'exclusiveMinimum':true,"
                         "'maximum':100,'exclusiveMaximum':true},"
                         "'f':{'type':'number','maximum':1},"
                         "'m':{'type':'integer','multipleOf':5},"
                         "'fm':{'type':'number','multipleOf':0.1},"
                         "'big':{'type':'number','maximum':1000000}");
    expect_valid(s, "{'spec':{'x':0,'ex':1,'f':1,'m':10,'fm':0.3}}");
    expect_one(s, "{'spec':{'x':200}}", "FieldValueInvalid", "spec.x",
               "Invalid value: 200: spec.x in body should be less than or equal to 100");
    expect_one(s, "{'spec':{'x':-1}}", "FieldValueInvalid", "spec.x",
               "Invalid value: -1: spec.x in body should be greater than or equal to 0");
    expect_one(s, "{'spec':{'ex':100}}", "FieldValueInvalid", "spec.ex",
               "Invalid value: 100: spec.ex in body should be less than 100");
    expect_one(s, "{'spec':{'ex':0}}", "FieldValueInvalid", "spec.ex",
               "Invalid value: 0: spec.ex in body should be greater than 0");
    expect_one(s, "{'spec':{'f':1.5}}", "FieldValueInvalid", "spec.f",
               "Invalid value: 1.5: spec.f in body should be less than or equal to 1");
    expect_one(s, "{'spec':{'m':7}}", "FieldValueInvalid", "spec.m",
               "Invalid value: 7: spec.m in body should be a multiple of 5");
    expect_one(s, "{'spec':{'fm':0.25}}", "FieldValueInvalid", "spec.fm",
               "Invalid value: 0.25: spec.fm in body should be a multiple of 0.1");
    /* Go prints large floats in exponent form. */
    expect_one(s, "{'spec':{'big':2500000.5}}", "FieldValueInvalid", "spec.big",
               "Invalid value: 2.5000005e+06: spec.big in body should be less than or equal to "
               "1e+06");
    /* int32 range for built-in int32 fields */
    const char *i32 = SPEC("'r':{'type':'integer','format':'int32'}");
    expect_valid(i32, "{'spec':{'r':2147483647}}");
    expect_one(i32, "{'spec':{'r':2147483648}}", "FieldValueInvalid", "spec.r",
               "Invalid value: 2147483648: spec.r in body should be less than or equal to "
               "2147483647");
}

static void test_strings(void **state)
{
    (void)state;
    const char *s = SPEC("'s':{'type':'string','minLength':3,'maxLength':5},"
                         "'one':{'type':'string','maxLength':1},"
                         "'p':{'type':'string','pattern':'^\\\\d{3}-\\\\w+$'}");
    expect_valid(s, "{'spec':{'s':'abc','p':'123-ab_c'}}");
    /* lengths count characters, not bytes */
    expect_valid(s, "{'spec':{'s':'\u00e4\u00f6\u00fc\u00e4\u00f6'}}");
    expect_one(s, "{'spec':{'s':'ab'}}", "FieldValueInvalid", "spec.s",
               "Invalid value: \"ab\": spec.s in body should be at least 3 chars long");
    expect_one(s, "{'spec':{'s':'abcdef'}}", "FieldValueTooLong", "spec.s",
               "Too long: may not be more than 5 bytes");
    expect_one(s, "{'spec':{'one':'ab'}}", "FieldValueTooLong", "spec.one",
               "Too long: may not be more than 1 byte");
    expect_one(s, "{'spec':{'p':'12-abc'}}", "FieldValueInvalid", "spec.p",
               "Invalid value: \"12-abc\": spec.p in body should match '^\\d{3}-\\w+$'");
    /* Go quoting of the bad value */
    expect_one(s, "{'spec':{'s':'a\\n'}}", "FieldValueInvalid", "spec.s",
               "Invalid value: \"a\\n\": spec.s in body should be at least 3 chars long");
}

static void test_formats(void **state)
{
    (void)state;
    const char *s = SPEC("'t':{'type':'string','format':'date-time'},"
                         "'d':{'type':'string','format':'date'},"
                         "'u':{'type':'string','format':'uuid'},"
                         "'h':{'type':'string','format':'hostname'},"
                         "'v4':{'type':'string','format':'ipv4'},"
                         "'v6':{'type':'string','format':'ipv6'},"
                         "'c':{'type':'string','format':'cidr'},"
                         "'b':{'type':'string','format':'byte'},"
                         "'x':{'type':'string','format':'something-unknown'}");
    expect_valid(s, "{'spec':{'t':'2024-02-29T10:00:00Z','d':'2024-02-29',"
                    "'u':'123e4567-e89b-12d3-a456-426614174000','h':'my-host.example.com',"
                    "'v4':'10.0.0.1','v6':'fe80::1','c':'10.0.0.0/8','b':'YWJj','x':'?'}}");
    expect_valid(s, "{'spec':{'b':'YWJj\\nZA=='}}");
    expect_valid(s, "{'spec':{'t':'2024-01-01T00:00:00.123456+02:00','c':'fd00::/64'}}");
    expect_one(s, "{'spec':{'t':'yesterday'}}", "FieldValueTypeInvalid", "spec.t",
               "Invalid value: \"yesterday\": spec.t in body must be of type date-time: "
               "\"yesterday\"");
    expect_one(s, "{'spec':{'d':'2023-02-29'}}", "FieldValueTypeInvalid", "spec.d",
               "Invalid value: \"2023-02-29\": spec.d in body must be of type date: "
               "\"2023-02-29\"");
    expect_one(s, "{'spec':{'u':'not-a-uuid'}}", "FieldValueTypeInvalid", "spec.u",
               "Invalid value: \"not-a-uuid\": spec.u in body must be of type uuid: "
               "\"not-a-uuid\"");
    expect_one(s, "{'spec':{'h':'-bad-'}}", "FieldValueTypeInvalid", "spec.h",
               "Invalid value: \"-bad-\": spec.h in body must be of type hostname: \"-bad-\"");
    expect_one(s, "{'spec':{'v4':'1.2.3.256'}}", "FieldValueTypeInvalid", "spec.v4",
               "Invalid value: \"1.2.3.256\": spec.v4 in body must be of type ipv4: "
               "\"1.2.3.256\"");
    expect_one(s, "{'spec':{'v6':'1.2.3.4'}}", "FieldValueTypeInvalid", "spec.v6",
               "Invalid value: \"1.2.3.4\": spec.v6 in body must be of type ipv6: \"1.2.3.4\"");
    expect_one(s, "{'spec':{'c':'10.0.0.0/33'}}", "FieldValueTypeInvalid", "spec.c",
               "Invalid value: \"10.0.0.0/33\": spec.c in body must be of type cidr: "
               "\"10.0.0.0/33\"");
    expect_one(s, "{'spec':{'b':'abc'}}", "FieldValueTypeInvalid", "spec.b",
               "Invalid value: \"abc\": spec.b in body must be of type byte: \"abc\"");
}

static void test_arrays(void **state)
{
    (void)state;
    const char *s = SPEC("'l':{'type':'array','minItems':2,'maxItems':3,"
                         "'items':{'type':'integer'}},"
                         "'one':{'type':'array','maxItems':1},"
                         "'u':{'type':'array','uniqueItems':true}");
    expect_valid(s, "{'spec':{'l':[1,2],'u':[1,'1',{'a':1},{'a':2}]}}");
    expect_one(s, "{'spec':{'l':[1]}}", "FieldValueInvalid", "spec.l",
               "Invalid value: 1: spec.l in body should have at least 2 items");
    expect_one(s, "{'spec':{'l':[1,2,3,4]}}", "FieldValueTooMany", "spec.l",
               "Too many: 4: must have at most 3 items");
    expect_one(s, "{'spec':{'one':[1,2]}}", "FieldValueTooMany", "spec.one",
               "Too many: 2: must have at most 1 item");
    expect_one(s, "{'spec':{'l':[1,'x']}}", "FieldValueTypeInvalid", "spec.l[1]",
               "Invalid value: \"string\": spec.l[1] in body must be of type integer: "
               "\"string\"");
    expect_one(s, "{'spec':{'u':[{'a':1,'b':2},{'b':2,'a':1}]}}", "FieldValueInvalid", "spec.u",
               "Invalid value: \"\": spec.u in body shouldn't contain duplicates");
}

static void test_properties_counts(void **state)
{
    (void)state;
    const char *s = SPEC("'m':{'type':'object','minProperties':2,'maxProperties':3,"
                         "'additionalProperties':{'type':'string'}},"
                         "'closed':{'type':'object','additionalProperties':false,"
                         "'properties':{'a':{'type':'string'}}}");
    expect_valid(s, "{'spec':{'m':{'a':'1','b':'2'}}}");
    expect_one(s, "{'spec':{'m':{'a':'1'}}}", "FieldValueInvalid", "spec.m",
               "Invalid value: 1: spec.m in body should have at least 2 properties");
    expect_one(s, "{'spec':{'m':{'a':'1','b':'2','c':'3','d':'4'}}}", "FieldValueTooMany", "spec.m",
               "Too many: 4: must have at most 3 items");
    /* map values are validated with a dotted path */
    expect_one(s, "{'spec':{'m':{'a':'1','b':2}}}", "FieldValueTypeInvalid", "spec.m.b",
               "Invalid value: \"integer\": spec.m.b in body must be of type string: "
               "\"integer\"");
    /* additionalProperties: false forbids (when not pruning) */
    result r = run_flags(s, "{'spec':{'closed':{'a':'x','zz':1}}}", SCHEMA_VALIDATE);
    assert_int_equal(r.n, 1);
    assert_string_equal(r.st->causes[0].field, "spec.closed");
    assert_string_equal(r.st->causes[0].message,
                        "Invalid value: \"zz\": spec.closed.zz in body is a forbidden property");
    assert_int_equal(r.nunknown, 1);
    assert_string_equal(r.unknown[0], "spec.closed.zz");
    done(&r);
}

static void test_combinators(void **state)
{
    (void)state;
    const char *s = SPEC("'v':{'anyOf':[{'type':'string'},{'type':'integer'}]},"
                         "'o':{'oneOf':[{'minimum':0},{'maximum':10}],'type':'integer'},"
                         "'a':{'allOf':[{'minLength':1},{'maxLength':3}],'type':'string'},"
                         "'n':{'not':{'enum':['bad']},'type':'string'}");
    expect_valid(s, "{'spec':{'v':'x','o':-5,'a':'ab','n':'good'}}");
    expect_valid(s, "{'spec':{'v':3,'o':20}}");
    result r = run(s, "{'spec':{'v':true}}");
    assert_true(r.n >= 2);
    assert_string_equal(r.st->causes[0].field, "");
    assert_string_equal(r.st->causes[0].message,
                        "Invalid value: \"\": \"spec.v\" must validate at least one schema "
                        "(anyOf)");
    assert_string_equal(r.st->causes[1].field, "spec.v");
    done(&r);
    r = run(s, "{'spec':{'o':5}}");
    assert_int_equal(r.n, 1);
    assert_string_equal(r.st->causes[0].message,
                        "Invalid value: \"\": \"spec.o\" must validate one and only one schema "
                        "(oneOf). Found 2 valid alternatives");
    done(&r);
    r = run(s, "{'spec':{'a':'abcd'}}");
    assert_int_equal(r.n, 2);
    assert_string_equal(r.st->causes[0].message, "Too long: may not be more than 3 bytes");
    assert_string_equal(r.st->causes[1].message,
                        "Invalid value: \"\": \"spec.a\" must validate all the schemas (allOf)");
    done(&r);
    expect_one(s, "{'spec':{'n':'bad'}}", "FieldValueInvalid", "",
               "Invalid value: \"\": \"spec.n\" must not validate the schema (not)");
}

/* ---------------------------------------------------------- lists */

static void test_list_type_set(void **state)
{
    (void)state;
    const char *s = SPEC("'s':{'type':'array','x-kubernetes-list-type':'set',"
                         "'items':{'type':'string'}},"
                         "'a':{'type':'array','x-kubernetes-list-type':'atomic'}");
    expect_valid(s, "{'spec':{'s':['a','b'],'a':[1,1]}}");
    result r = run(s, "{'spec':{'s':['a','b','a','a','b']}}");
    assert_int_equal(r.n, 2);
    assert_string_equal(r.st->causes[0].type, "FieldValueDuplicate");
    assert_string_equal(r.st->causes[0].field, "spec.s[2]");
    assert_string_equal(r.st->causes[0].message, "Duplicate value: \"a\"");
    assert_string_equal(r.st->causes[1].field, "spec.s[4]");
    assert_string_equal(r.st->causes[1].message, "Duplicate value: \"b\"");
    done(&r);
}

static void test_list_type_map(void **state)
{
    (void)state;
    const char *one = SPEC("'m':{'type':'array','x-kubernetes-list-type':'map',"
                           "'x-kubernetes-list-map-keys':['name'],'items':{'type':'object',"
                           "'properties':{'name':{'type':'string'},'x':{'type':'integer'}}}}");
    expect_valid(one, "{'spec':{'m':[{'name':'a'},{'name':'b','x':1}]}}");
    expect_one(one, "{'spec':{'m':[{'name':'a'},{'name':'b'},{'name':'a','x':1}]}}",
               "FieldValueDuplicate", "spec.m[2]", "Duplicate value: {\"name\":\"a\"}");
    /* two elements without the key collide on the unspecified key */
    expect_one(one, "{'spec':{'m':[{'x':1},{'x':2}]}}", "FieldValueDuplicate", "spec.m[1]",
               "Duplicate value: {}");
    const char *two = SPEC("'p':{'type':'array','x-kubernetes-list-type':'map',"
                           "'x-kubernetes-list-map-keys':['port','protocol'],'items':{"
                           "'type':'object','properties':{'port':{'type':'integer'},"
                           "'protocol':{'type':'string'}}}}");
    expect_valid(two, "{'spec':{'p':[{'port':80,'protocol':'TCP'},{'port':80,"
                      "'protocol':'UDP'}]}}");
    expect_one(two,
               "{'spec':{'p':[{'port':80,'protocol':'TCP'},{'port':80,'protocol':'UDP'},"
               "{'protocol':'TCP','port':80}]}}",
               "FieldValueDuplicate", "spec.p[2]",
               "Duplicate value: {\"port\":80,\"protocol\":\"TCP\"}");
    /* a list-type map must hold objects */
    const char *loose = SPEC("'m':{'type':'array','x-kubernetes-list-type':'map',"
                             "'x-kubernetes-list-map-keys':['name']}");
    expect_one(loose, "{'spec':{'m':[5,{'name':'a'}]}}", "FieldValueInvalid", "spec.m[0]",
               "Invalid value: 5: must be an object for an array of list-type map");
}

/* -------------------------------------------------- pruning, unknown */

static void test_prune_and_unknown_paths(void **state)
{
    (void)state;
    const char *s = "{'type':'object','properties':{'spec':{'type':'object','properties':{"
                    "'items':{'type':'array','items':{'type':'object','properties':{"
                    "'name':{'type':'string'}}}},"
                    "'labels':{'type':'object','additionalProperties':{'type':'string'}},"
                    "'any':{'type':'object','additionalProperties':true},"
                    "'empty':{'type':'object'}}}}}";
    result r = run(s, "{'apiVersion':'v1','kind':'Thing','metadata':{'name':'x','odd':1},"
                      "'extra':1,'spec':{'foo':1,'items':[{'name':'a','bar':2},{'name':'b'}],"
                      "'labels':{'a':'b'},'any':{'k':{'deep':1}},'empty':{'gone':1}}}");
    assert_int_equal(r.n, 0);
    assert_int_equal(r.nunknown, 4);
    assert_string_equal(r.unknown[0], "extra");
    assert_string_equal(r.unknown[1], "spec.foo");
    assert_string_equal(r.unknown[2], "spec.items[0].bar");
    assert_string_equal(r.unknown[3], "spec.empty.gone");
    /* metadata is untouched; apiVersion and kind are always kept */
    expect_obj(&r, "{'apiVersion':'v1','kind':'Thing','metadata':{'name':'x','odd':1},"
                   "'spec':{'items':[{'name':'a'},{'name':'b'}],'labels':{'a':'b'},"
                   "'any':{'k':{'deep':1}},'empty':{}}}");
    done(&r);

    /* Without PRUNE the paths are still reported and nothing is removed. */
    r = run_flags(s, "{'spec':{'foo':1}}", SCHEMA_VALIDATE);
    assert_int_equal(r.nunknown, 1);
    assert_string_equal(r.unknown[0], "spec.foo");
    expect_obj(&r, "{'spec':{'foo':1}}");
    done(&r);

    /* unknown_fields may be NULL */
    json_t *sch = J(s), *o = J("{'spec':{'foo':1}}");
    assert_int_equal(schema_apply(sch, o, SCHEMA_PRUNE, NULL, NULL, NULL), 0);
    assert_null(json_object_get(json_object_get(o, "spec"), "foo"));
    json_decref(sch);
    json_decref(o);
}

static void test_preserve_unknown(void **state)
{
    (void)state;
    const char *s =
        "{'type':'object','properties':{'spec':{'type':'object',"
        "'x-kubernetes-preserve-unknown-fields':true,'properties':{"
        "'n':{'type':'integer'},'strict':{'type':'object','properties':{'a':{'type':'string'}}}}},"
        "'free':{'x-kubernetes-preserve-unknown-fields':true}}}";
    result r = run(s, "{'spec':{'n':1,'whatever':{'x':[1,2]},'strict':{'a':'x','b':1}},"
                      "'free':{'a':{'b':{'c':1}},'d':[{}]}}");
    assert_int_equal(r.n, 0);
    assert_int_equal(r.nunknown, 1);
    assert_string_equal(r.unknown[0], "spec.strict.b");
    expect_obj(&r, "{'spec':{'n':1,'whatever':{'x':[1,2]},'strict':{'a':'x'}},"
                   "'free':{'a':{'b':{'c':1}},'d':[{}]}}");
    done(&r);
    /* known fields under a preserving node are still validated */
    expect_one(s, "{'spec':{'n':'1'}}", "FieldValueTypeInvalid", "spec.n",
               "Invalid value: \"string\": spec.n in body must be of type integer: \"string\"");
    /* preserve at the root keeps everything */
    r = run("{'type':'object','x-kubernetes-preserve-unknown-fields':true}",
            "{'spec':{'a':1},'x':2}");
    assert_int_equal(r.nunknown, 0);
    expect_obj(&r, "{'spec':{'a':1},'x':2}");
    done(&r);
}

static void test_embedded_resource(void **state)
{
    (void)state;
    const char *s = SPEC("'template':{'type':'object','x-kubernetes-embedded-resource':true,"
                         "'properties':{'spec':{'type':'object','properties':{"
                         "'x':{'type':'integer'}}}}}");
    result r = run(s, "{'spec':{'template':{'apiVersion':'v1','kind':'Pod',"
                      "'metadata':{'name':'p'},'spec':{'x':1,'y':2},'junk':1}}}");
    assert_int_equal(r.n, 0);
    assert_int_equal(r.nunknown, 2);
    assert_string_equal(r.unknown[0], "spec.template.spec.y");
    assert_string_equal(r.unknown[1], "spec.template.junk");
    expect_obj(&r, "{'spec':{'template':{'apiVersion':'v1','kind':'Pod',"
                   "'metadata':{'name':'p'},'spec':{'x':1}}}}");
    done(&r);
    expect_one(s, "{'spec':{'template':{'apiVersion':'v1'}}}", "FieldValueRequired",
               "spec.template.kind", "Required value");
    r = run(s, "{'spec':{'template':{'apiVersion':5,'kind':'','metadata':'m'}}}");
    assert_int_equal(r.n, 3);
    assert_string_equal(r.st->causes[0].field, "spec.template.apiVersion");
    assert_string_equal(r.st->causes[0].message, "Invalid value: 5: must be a string");
    assert_string_equal(r.st->causes[1].field, "spec.template.kind");
    assert_string_equal(r.st->causes[1].message, "Invalid value: \"\": must not be empty");
    assert_string_equal(r.st->causes[2].field, "spec.template.metadata");
    done(&r);
}

static void test_root_metadata(void **state)
{
    (void)state;
    /* Even a schema that describes metadata does not prune or check it. */
    const char *s = "{'type':'object','properties':{'metadata':{'type':'object','properties':{"
                    "'name':{'type':'string','maxLength':2}}}}}";
    result r = run(s, "{'metadata':{'name':'long-name','other':1},'kind':'X','apiVersion':'v1'}");
    assert_int_equal(r.n, 0);
    assert_int_equal(r.nunknown, 0);
    expect_obj(&r, "{'metadata':{'name':'long-name','other':1},'kind':'X','apiVersion':'v1'}");
    done(&r);
    expect_one(s, "{'metadata':'x'}", "FieldValueTypeInvalid", "metadata",
               "Invalid value: \"string\": metadata in body must be of type object: \"string\"");
}

/* ------------------------------------------------------- defaulting */

static void test_defaults(void **state)
{
    (void)state;
    const char *s =
        "{'type':'object','properties':{'spec':{'type':'object','default':{},'properties':{"
        "'replicas':{'type':'integer','default':1},"
        "'mode':{'type':'string','default':'auto'},"
        "'keep':{'type':'string','nullable':true,'default':'k'},"
        "'list':{'type':'array','items':{'type':'object','default':{'a':1},"
        "'properties':{'a':{'type':'integer'},'b':{'type':'integer','default':2}}}}}}}}";
    result r = run(s, "{}");
    assert_int_equal(r.n, 0);
    expect_obj(&r, "{'spec':{'replicas':1,'mode':'auto','keep':'k'}}");
    done(&r);
    /* null non-nullable fields get the default; nullable nulls stay */
    r = run(s, "{'spec':{'replicas':null,'mode':'manual','keep':null,'list':[null,{'a':5}]}}");
    assert_int_equal(r.n, 0);
    expect_obj(&r, "{'spec':{'replicas':1,'mode':'manual','keep':null,"
                   "'list':[{'a':1,'b':2},{'a':5,'b':2}]}}");
    done(&r);
    /* without DEFAULT nothing is filled in */
    r = run_flags(s, "{}", SCHEMA_VALIDATE | SCHEMA_PRUNE);
    expect_obj(&r, "{}");
    done(&r);
}

static void test_omitempty(void **state)
{
    (void)state;
    const char *s = "{'type':'object','required':['items'],'properties':{"
                    "'data':{'type':'object','additionalProperties':{'type':'string'}},"
                    "'items':{'type':'array','items':{'type':'string'}},"
                    "'ports':{'type':'array','items':{'type':'integer'}},"
                    "'spec':{'type':'object','properties':{'a':{'type':'string'},"
                    "'env':{'type':'array','items':{'type':'string'}}}},"
                    "'open':{'type':'object','additionalProperties':{'type':'string'},"
                    "'x-kubernetes-preserve-unknown-fields':true},"
                    "'name':{'type':'string'}}}";
    const char *o = "{'data':{},'items':[],'ports':[],'spec':{'env':[]},'open':{},'name':''}";
    /* empty maps and lists go unless required; structs, preserved objects
     * and empty strings (maybe a pointer upstream) stay */
    result r = run_flags(s, o, SCHEMA_ALL | SCHEMA_OMITEMPTY);
    assert_int_equal(r.n, 0);
    expect_obj(&r, "{'items':[],'spec':{},'open':{},'name':''}");
    done(&r);
    /* non-empty ones stay */
    r = run_flags(s, "{'data':{'a':'b'},'items':['x'],'ports':[1]}", SCHEMA_ALL | SCHEMA_OMITEMPTY);
    expect_obj(&r, "{'data':{'a':'b'},'items':['x'],'ports':[1]}");
    done(&r);
    /* without the flag (custom resources) everything stays as sent */
    r = run(s, o);
    expect_obj(&r, o);
    done(&r);
}

static void test_validate_at(void **state)
{
    (void)state;
    json_t *meta = builtin_schema_fragment("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta");
    assert_non_null(meta);
    json_t *v = J("{'name':'x','labels':{'a':1},'finalizers':'f',"
                  "'ownerReferences':[{'name':'o','controller':'yes'}]}");
    ckube_status *st = ckube_status_invalid_begin("", "ConfigMap", "x");
    int n = schema_validate_at(meta, v, "metadata", st);
    assert_int_equal(n, (int)st->ncauses);
    const char *want[][2] = {
        {"metadata.labels.a", "Invalid value: \"integer\": metadata.labels.a in body must be of "
                              "type string: \"integer\""},
        {"metadata.ownerReferences[0].controller",
         "Invalid value: \"string\": metadata.ownerReferences[0].controller in body must be of "
         "type boolean: \"string\""},
        {"metadata.finalizers", "Invalid value: \"string\": metadata.finalizers in body must be "
                                "of type array: \"string\""},
    };
    size_t found = 0;
    for (size_t i = 0; i < 3; i++)
        for (size_t c = 0; c < st->ncauses; c++)
            if (!strcmp(st->causes[c].field, want[i][0])) {
                assert_string_equal(st->causes[c].type, CKUBE_CAUSE_FIELD_TYPE_INVALID);
                assert_string_equal(st->causes[c].message, want[i][1]);
                found++;
            }
    assert_int_equal(found, 3);
    ckube_status_free(st);
    json_decref(v);
    /* well-typed metadata has no causes; no path names fields plainly */
    v = J("{'name':'x','labels':{'a':'b'},'annotations':{},'finalizers':['f']}");
    st = ckube_status_invalid_begin("", "ConfigMap", "x");
    assert_int_equal(schema_validate_at(meta, v, "metadata", st), 0);
    json_decref(v);
    v = J("{'labels':5}");
    assert_int_equal(schema_validate_at(meta, v, NULL, st), 1);
    assert_string_equal(st->causes[0].field, "labels");
    ckube_status_free(st);
    json_decref(v);
    json_decref(meta);
}

/* ------------------------------------------------------ robustness */

static void test_bad_schemas(void **state)
{
    (void)state;
    const char *schemas[] = {
        "[]",
        "'string'",
        "{'type':5}",
        "{'type':['string',5]}",
        "{'type':'object','properties':[]}",
        "{'type':'object','properties':{'a':5,'b':'x','c':null}}",
        "{'type':'object','required':'a'}",
        "{'type':'object','required':[1,null]}",
        "{'type':'array','items':[{'type':'string'}]}",
        "{'type':'object','properties':{'a':{'type':'string','pattern':'(['}}}",
        "{'type':'object','properties':{'a':{'type':'string','pattern':5,'maxLength':'x',"
        "'minLength':-3,'enum':'x','format':7}}}",
        "{'type':'object','properties':{'l':{'type':'array','x-kubernetes-list-type':'map',"
        "'x-kubernetes-list-map-keys':'name'}}}",
        "{'type':'object','properties':{'l':{'type':'array','x-kubernetes-list-type':'map',"
        "'x-kubernetes-list-map-keys':[1,{}]}}}",
        "{'type':'object','properties':{'n':{'type':'number','multipleOf':0,'minimum':'a',"
        "'maximum':null}}}",
        "{'type':'object','properties':{'n':{'anyOf':5,'oneOf':[5,'x'],'allOf':[null],"
        "'not':[]}}}",
        "{'type':'object','additionalProperties':5,'minProperties':'x'}",
        "{'type':'object','properties':{'a':{'default':{'x':1},'nullable':'yes'}}}",
        "{'type':'unknown-type'}",
    };
    const char *objs[] = {
        ("{'a':'x','b':[1,{'name':'a'},null],'l':[{'name':1},{'name':1},5,null],'n':3,"
         "'metadata':{}}"),
        "{'a':null,'l':[],'n':1e300}",
        "{}",
    };
    for (size_t i = 0; i < sizeof schemas / sizeof *schemas; i++)
        for (size_t j = 0; j < sizeof objs / sizeof *objs; j++) {
            result r = run(schemas[i], objs[j]);
            assert_true(r.n >= 0);
            done(&r);
        }
    /* NULL schema: anything goes */
    json_t *o = J("{'x':1}");
    ckube_status *st = ckube_status_invalid_begin("", "X", "x");
    assert_int_equal(schema_apply(NULL, o, SCHEMA_ALL, st, NULL, NULL), 0);
    assert_int_equal(schema_apply(o, NULL, SCHEMA_ALL, st, NULL, NULL), 0);
    ckube_status_free(st);
    json_decref(o);
}

/* A schema nested far deeper than the walk recurses must not overflow. */
static void test_deep_nesting(void **state)
{
    (void)state;
    const int depth = 900;
    size_t cap = (size_t)depth * 64 + 64;
    char *sch = malloc(cap), *obj = malloc(cap);
    assert_non_null(sch);
    assert_non_null(obj);
    size_t ls = 0, lo = 0;
    for (int i = 0; i < depth; i++) {
        ls += (size_t)sprintf(sch + ls, "{\"type\":\"object\",\"properties\":{\"a\":");
        lo += (size_t)sprintf(obj + lo, "{\"a\":");
    }
    ls += (size_t)sprintf(sch + ls, "{\"type\":\"integer\"}");
    lo += (size_t)sprintf(obj + lo, "\"x\"");
    for (int i = 0; i < depth; i++) {
        ls += (size_t)sprintf(sch + ls, "}}");
        lo += (size_t)sprintf(obj + lo, "}");
    }
    json_error_t err;
    json_t *s = json_loads(sch, 0, &err);
    json_t *o = json_loads(obj, 0, &err);
    free(sch);
    free(obj);
    if (s && o) {
        ckube_status *st = ckube_status_invalid_begin("", "X", "x");
        assert_true(schema_apply(s, o, SCHEMA_ALL, st, NULL, NULL) >= 0);
        ckube_status_free(st);
    }
    json_decref(s);
    json_decref(o);
}

/* ------------------------------------------------------- helpers */

static void expect_format(const char *json, const char *want)
{
    json_t *v = J(json);
    char *got = schema_format_value(v);
    assert_non_null(got);
    assert_string_equal(got, want);
    free(got);
    json_decref(v);
}

static void test_format_value(void **state)
{
    (void)state;
    expect_format("1000000.0", "1e+06");
    expect_format("123456.0", "123456");
    expect_format("1234567.0", "1.234567e+06");
    expect_format("0.5", "0.5");
    expect_format("100.0", "100");
    expect_format("0.00001", "1e-05");
    expect_format("0.0001", "0.0001");
    expect_format("-2.5", "-2.5");
    expect_format("0.1", "0.1");
    expect_format("42", "42");
    expect_format("true", "true");
    expect_format("null", "null");
    expect_format("'a\\\"b\\n\\t\\u0001\u00e9'", "\"a\\\"b\\n\\t\\x01\u00e9\"");
    expect_format("{'b':1,'a':[true,null]}", "{\"a\":[true,null],\"b\":1}");
}

static void expect_posix(const char *ecma, const char *want)
{
    char *got = schema_ecma_to_posix(ecma);
    if (!want) {
        if (got)
            fail_msg("%s converted to %s, expected failure", ecma, got);
        return;
    }
    assert_non_null(got);
    assert_string_equal(got, want);
    free(got);
}

static void test_ecma_to_posix(void **state)
{
    (void)state;
    expect_posix("^\\d+$", "^[0-9]+$");
    expect_posix("\\D\\W\\S", "[^0-9][^A-Za-z0-9_][^[:space:]]");
    expect_posix("(?:ab)+?c*?", "(ab)+c*");
    expect_posix("[\\w.-]+", "[A-Za-z0-9_.-]+");
    expect_posix("[a-z\\]]", "[]a-z]");
    expect_posix("\\.\\/x", "\\./x");
    expect_posix("a{2,3}", "a{2,3}");
    expect_posix("a{b", "a\\{b");
    expect_posix("(?=x)", NULL);
    expect_posix("\\bword", NULL);
    expect_posix("[\\D]", NULL);
    expect_posix("\\", NULL);
    /* what would make regcomp blow up is not enforced (Go refuses it) */
    expect_posix("^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)*$",
                 "^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$");
    expect_posix("a{1000}", "a{1000}");
    expect_posix("a{1001}", NULL);
    expect_posix("a{2,1}", NULL);
    expect_posix("((a{100}){100}){100}", NULL);
    expect_posix("(a{100}){100}", "(a{100}){100}");
    expect_posix("a**", NULL);
    expect_posix("a+*", NULL);
    expect_posix("a{2}{3}", NULL);
    expect_posix("a*{3}", NULL);
    expect_posix("a(", "a(");
    expect_posix("a)", NULL);
    /* a fuzzer's find: 57 nested '+' took glibc's regcomp past 2 GiB */
    char bomb[128] = "^x\\{";
    memset(bomb + strlen(bomb), '+', 57);
    expect_posix(bomb, NULL);
    /* every pattern that converts compiles in bounded memory: the worst
     * accepted shape here is compiled for real */
    regex_t re;
    char *posix = schema_ecma_to_posix("((a{100}){100}|b{1000}){1}");
    if (posix) {
        assert_int_equal(regcomp(&re, posix, REG_EXTENDED | REG_NOSUB), 0);
        regfree(&re);
        free(posix);
    }
}

static void expect_re2(const char *pattern, const char *want)
{
    char *got = schema_re2_error(pattern);
    if (!want) {
        if (got)
            fail_msg("%s: unexpected error %s", pattern, got);
        return;
    }
    if (!got)
        fail_msg("%s: no error, want %s", pattern, want);
    if (strcmp(got, want) != 0)
        fail_msg("%s:\n got %s\nwant %s", pattern, got, want);
    free(got);
}

/* Go's regexp.Compile errors for CRD patterns, as upstream reports them. */
static void test_re2_errors(void **state)
{
    (void)state;
    expect_re2("^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", NULL);
    expect_re2("^(?:ab)+?c*?d{2,3}?$", NULL);
    expect_re2("(?i)abc(?P<n>x)(?<m>y)(?s:.)", NULL);
    expect_re2("[]a]\\[\\]]{2}[[:alpha:]]", NULL);
    expect_re2("a{,2}x{y}", NULL); /* not counts: literal braces */
    expect_re2("\\101", NULL);     /* octal */
    expect_re2("+", "error parsing regexp: missing argument to repetition operator: `+`");
    expect_re2("a|*", "error parsing regexp: missing argument to repetition operator: `*`");
    expect_re2("(+?)", "error parsing regexp: missing argument to repetition operator: `+?`");
    expect_re2("a**", "error parsing regexp: invalid nested repetition operator: `**`");
    expect_re2("a+?*", "error parsing regexp: invalid nested repetition operator: `+?*`");
    expect_re2("a{2}{3}", "error parsing regexp: invalid nested repetition operator: `{2}{3}`");
    expect_re2("a{1001}", "error parsing regexp: invalid repeat count: `{1001}`");
    expect_re2("a{3,2}", "error parsing regexp: invalid repeat count: `{3,2}`");
    expect_re2("(ab", "error parsing regexp: missing closing ): `(ab`");
    expect_re2("ab)", "error parsing regexp: unexpected ): `ab)`");
    expect_re2("x[a-z", "error parsing regexp: missing closing ]: `[a-z`");
    expect_re2("(?=x)", "error parsing regexp: invalid or unsupported Perl syntax: `(?=`");
    expect_re2("(a)\\1", "error parsing regexp: invalid escape sequence: `\\1`");
    expect_re2("ab\\", "error parsing regexp: trailing backslash at end of expression: ``");
}

/* ------------------------------------------------ built-in schemas */

static result run_builtin(const char *group, const char *kind, const char *obj)
{
    result r = {0};
    json_t *s = builtin_schema(group, "v1", kind);
    assert_non_null(s);
    r.obj = J(obj);
    r.st = ckube_status_invalid_begin(group, kind, "x");
    r.n = schema_apply(s, r.obj, SCHEMA_ALL, r.st, &r.unknown, &r.nunknown);
    json_decref(s);
    return r;
}

static void expect_builtin_clean(const char *group, const char *kind, const char *obj)
{
    result r = run_builtin(group, kind, obj);
    for (size_t i = 0; i < r.nunknown; i++)
        fprintf(stderr, "  unknown: %s\n", r.unknown[i]);
    if (r.n || r.nunknown) {
        dump_causes(&r);
        fail_msg("%s should be clean", kind);
    }
    done(&r);
}

static const char *deployment =
    "{'apiVersion':'apps/v1','kind':'Deployment','metadata':{'creationTimestamp':null,"
    "'labels':{'app':'web'},'name':'web'},'spec':{'replicas':3,'selector':{'matchLabels':"
    "{'app':'web'}},'strategy':{'type':'RollingUpdate','rollingUpdate':{'maxSurge':'25%',"
    "'maxUnavailable':1}},'template':{'metadata':{'creationTimestamp':null,'labels':"
    "{'app':'web'}},'spec':{'containers':[{'image':'nginx:1.27','name':'nginx','ports':"
    "[{'containerPort':80,'protocol':'TCP'}],'env':[{'name':'A','value':'1'},{'name':'B',"
    "'valueFrom':{'fieldRef':{'fieldPath':'metadata.name'}}}],'resources':{'limits':"
    "{'cpu':'500m','memory':'128Mi'},'requests':{'cpu':0.25}},'readinessProbe':{'httpGet':"
    "{'path':'/','port':'http'},'periodSeconds':5},'volumeMounts':[{'name':'cfg',"
    "'mountPath':'/etc/cfg','readOnly':true}]}],'volumes':[{'name':'cfg','configMap':"
    "{'name':'web'}}],'affinity':{'podAntiAffinity':{}},'terminationGracePeriodSeconds':30}}},"
    "'status':{}}";

static void test_builtin_valid_objects(void **state)
{
    (void)state;
    expect_builtin_clean("apps", "Deployment", deployment);
    expect_builtin_clean(
        "", "Pod",
        "{'apiVersion':'v1','kind':'Pod','metadata':{'name':'p','namespace':'default'},"
        "'spec':{'containers':[{'name':'c','image':'busybox','command':['sh','-c','sleep 1'],"
        "'securityContext':{'runAsUser':1000,'capabilities':{'drop':['ALL']}}}],"
        "'restartPolicy':'Never','tolerations':[{'key':'k','operator':'Exists'}],"
        "'nodeSelector':{'kubernetes.io/os':'linux'}},'status':{'phase':'Pending',"
        "'conditions':[{'type':'PodScheduled','status':'True'}],'containerStatuses':[{'name':'c',"
        "'ready':false,'restartCount':0,'state':{'waiting':{'reason':'ContainerCreating'}}}]}}");
    expect_builtin_clean("", "ConfigMap",
                         "{'apiVersion':'v1','kind':'ConfigMap','metadata':{'name':'c'},"
                         "'data':{'a':'b'},'binaryData':{'bin':'AAEC'},'immutable':false}");
    expect_builtin_clean("", "Secret",
                         "{'apiVersion':'v1','kind':'Secret','metadata':{'name':'s'},"
                         "'type':'Opaque','data':{'pw':'c2VjcmV0'},'stringData':{'u':'me'}}");
    expect_builtin_clean(
        "", "Service",
        "{'apiVersion':'v1','kind':'Service','metadata':{'name':'s'},'spec':{'type':'NodePort',"
        "'selector':{'app':'web'},'ports':[{'name':'http','port':80,'targetPort':8080,"
        "'nodePort':30080,'protocol':'TCP'},{'name':'h2','port':81,'targetPort':'h2'}],"
        "'clusterIP':'10.0.0.10','ipFamilies':['IPv4']},'status':{'loadBalancer':{}}}");
    expect_builtin_clean("", "Namespace",
                         "{'apiVersion':'v1','kind':'Namespace','metadata':{'name':'n'},"
                         "'spec':{'finalizers':['kubernetes']},'status':{'phase':'Active'}}");
    expect_builtin_clean("coordination.k8s.io", "Lease",
                         "{'apiVersion':'coordination.k8s.io/v1','kind':'Lease','metadata':"
                         "{'name':'l'},'spec':{'holderIdentity':'me','leaseDurationSeconds':15,"
                         "'acquireTime':'2024-05-01T10:00:00.000000Z','renewTime':"
                         "'2024-05-01T10:00:05.123456Z','leaseTransitions':2}}");
    expect_builtin_clean("", "Event",
                         "{'apiVersion':'v1','kind':'Event','metadata':{'name':'e'},"
                         "'involvedObject':{'kind':'Pod','name':'p','namespace':'default'},"
                         "'reason':'Started','message':'m','source':{'component':'kubelet'},"
                         "'firstTimestamp':'2024-05-01T10:00:00Z','count':1,'type':'Normal',"
                         "'eventTime':null,'reportingComponent':''}");
    expect_builtin_clean("events.k8s.io", "Event",
                         "{'apiVersion':'events.k8s.io/v1','kind':'Event','metadata':"
                         "{'name':'e'},'eventTime':'2024-05-01T10:00:00.000001Z',"
                         "'reportingController':'c','reportingInstance':'i','action':'A',"
                         "'reason':'R','regarding':{'kind':'Pod','name':'p'},'type':'Normal'}");
    expect_builtin_clean("", "Endpoints",
                         "{'apiVersion':'v1','kind':'Endpoints','metadata':{'name':'s'},"
                         "'subsets':[{'addresses':[{'ip':'10.1.0.5','targetRef':{'kind':'Pod',"
                         "'name':'p'}}],'ports':[{'port':8080,'name':'http'}]}]}");
    expect_builtin_clean("", "ServiceAccount",
                         "{'apiVersion':'v1','kind':'ServiceAccount','metadata':{'name':'sa'},"
                         "'imagePullSecrets':[{'name':'reg'}]}");
    expect_builtin_clean("", "Node",
                         "{'apiVersion':'v1','kind':'Node','metadata':{'name':'n1'},"
                         "'spec':{'podCIDR':'10.244.0.0/24','taints':[{'key':'k','effect':"
                         "'NoSchedule'}]},'status':{'capacity':{'cpu':'4','pods':110},"
                         "'conditions':[{'type':'Ready','status':'True'}],'nodeInfo':"
                         "{'kubeletVersion':'v1.33.0','newField':1}}}");
    expect_builtin_clean("apps", "ReplicaSet",
                         "{'apiVersion':'apps/v1','kind':'ReplicaSet','metadata':{'name':'r'},"
                         "'spec':{'replicas':1,'selector':{'matchLabels':{'a':'b'}},'template':"
                         "{'metadata':{'labels':{'a':'b'}},'spec':{'containers':[{'name':'c',"
                         "'image':'i'}]}}},'status':{'replicas':1}}");
    assert_null(builtin_schema("", "v1", "NoSuchKind"));
    assert_null(builtin_schema(NULL, "v1", "Pod"));
}

static void test_builtin_errors(void **state)
{
    (void)state;
    result r =
        run_builtin("apps", "Deployment",
                    "{'apiVersion':'apps/v1','kind':'Deployment','metadata':{'name':'web'},'spec':{"
                    "'replicas':'3','baz':1,'selector':{'matchLabels':{'app':'web'}},'template':{"
                    "'metadata':{'labels':{'app':'web'}},'spec':{'containers':[{'image':'nginx',"
                    "'imagePullPolice':'Always','ports':[{'containerPort':'80'}]}]}}}}");
    assert_int_equal(r.nunknown, 2);
    assert_string_equal(r.unknown[0], "spec.baz");
    assert_string_equal(r.unknown[1], "spec.template.spec.containers[0].imagePullPolice");
    assert_int_equal(r.n, 3);
    assert_string_equal(r.st->causes[0].field, "spec.replicas");
    assert_string_equal(r.st->causes[1].field, "spec.template.spec.containers[0].ports[0]"
                                               ".containerPort");
    assert_string_equal(r.st->causes[2].field, "spec.template.spec.containers[0].name");
    assert_string_equal(r.st->causes[2].message, "Required value");
    ckube_status_invalid_finish(r.st);
    assert_non_null(strstr(r.st->message, "Deployment.apps \"x\" is invalid: [spec.replicas: "
                                          "Invalid value: \"string\": spec.replicas in body "
                                          "must be of type integer: \"string\""));
    done(&r);
}

/* Every inlined shared definition keeps its name for the OpenAPI
 * publisher, and fragments resolve. */
static void test_builtin_fragments(void **state)
{
    (void)state;
    json_t *s = builtin_schema("apps", "v1", "Deployment");
    json_t *tmpl =
        json_object_get(json_object_get(json_object_get(s, "properties"), "spec"), "properties");
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(tmpl, "template"), "x-ckube-ref")),
        "io.k8s.api.core.v1.PodTemplateSpec");
    /* the field's own description overrides the definition's */
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(tmpl, "replicas"), "type")), "integer");
    json_decref(s);
    json_t *c = builtin_schema_fragment("io.k8s.api.core.v1.Container");
    assert_non_null(c);
    assert_non_null(json_object_get(json_object_get(c, "properties"), "image"));
    json_decref(c);
    assert_null(builtin_schema_fragment("io.k8s.api.core.v1.Nope"));
    assert_string_equal(builtin_definition_name("", "v1", "ConfigMap"),
                        "io.k8s.api.core.v1.ConfigMap");
    assert_string_equal(builtin_definition_name("events.k8s.io", "v1", "Event"),
                        "io.k8s.api.events.v1.Event");
}

/* sch_keywords finds every keyword in one pass (its name table is looked
 * up by bsearch: an unsorted entry or a wrong field would go unnoticed
 * by the other tests until the keyword mattered). */
static void test_keywords(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        size_t off;
    } all[] = {
#define K(n, f) {n, offsetof(sch_kw, f)}
        K("type", type),
        K("enum", enum_),
        K("nullable", nullable),
        K("x-kubernetes-int-or-string", int_or_string),
        K("anyOf", any_of),
        K("oneOf", one_of),
        K("allOf", all_of),
        K("not", not_),
        K("format", format),
        K("pattern", pattern),
        K("maxLength", max_length),
        K("minLength", min_length),
        K("multipleOf", multiple_of),
        K("minimum", minimum),
        K("maximum", maximum),
        K("exclusiveMinimum", exclusive_minimum),
        K("exclusiveMaximum", exclusive_maximum),
        K("items", items),
        K("minItems", min_items),
        K("maxItems", max_items),
        K("uniqueItems", unique_items),
        K("x-kubernetes-list-type", list_type),
        K("x-kubernetes-list-map-keys", list_map_keys),
        K("properties", properties),
        K("additionalProperties", additional_properties),
        K("minProperties", min_properties),
        K("maxProperties", max_properties),
        K("required", required),
        K("x-kubernetes-embedded-resource", embedded_resource),
        K("x-kubernetes-preserve-unknown-fields", preserve_unknown_fields),
#undef K
    };
    size_t n = sizeof all / sizeof *all;
    assert_int_equal(n * sizeof(const json_t *), sizeof(sch_kw)); /* every field listed */
    json_t *s = json_object();
    json_object_set_new(s, "description", json_string("not a keyword"));
    json_object_set_new(s, "x-kubernetes-validations", json_array());
    for (size_t i = 0; i < n; i++)
        json_object_set_new(s, all[i].name, json_integer((json_int_t)i));
    sch_kw kw;
    sch_keywords(s, &kw);
    for (size_t i = 0; i < n; i++) {
        const json_t *v = *(const json_t *const *)(const void *)((const char *)&kw + all[i].off);
        assert_non_null(v);
        assert_int_equal(json_integer_value(v), (json_int_t)i);
    }
    json_decref(s);
    /* absent keywords are NULL */
    s = json_pack("{s:s}", "type", "string");
    sch_keywords(s, &kw);
    assert_string_equal(json_string_value(kw.type), "string");
    assert_null(kw.enum_);
    assert_null(kw.properties);
    assert_null(kw.preserve_unknown_fields);
    json_decref(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keywords),
        cmocka_unit_test(test_type_errors),
        cmocka_unit_test(test_nullable),
        cmocka_unit_test(test_int_or_string),
        cmocka_unit_test(test_required_and_enum),
        cmocka_unit_test(test_numbers),
        cmocka_unit_test(test_strings),
        cmocka_unit_test(test_formats),
        cmocka_unit_test(test_arrays),
        cmocka_unit_test(test_properties_counts),
        cmocka_unit_test(test_combinators),
        cmocka_unit_test(test_list_type_set),
        cmocka_unit_test(test_list_type_map),
        cmocka_unit_test(test_prune_and_unknown_paths),
        cmocka_unit_test(test_preserve_unknown),
        cmocka_unit_test(test_embedded_resource),
        cmocka_unit_test(test_root_metadata),
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_omitempty),
        cmocka_unit_test(test_validate_at),
        cmocka_unit_test(test_bad_schemas),
        cmocka_unit_test(test_deep_nesting),
        cmocka_unit_test(test_format_value),
        cmocka_unit_test(test_ecma_to_posix),
        cmocka_unit_test(test_re2_errors),
        cmocka_unit_test(test_builtin_valid_objects),
        cmocka_unit_test(test_builtin_errors),
        cmocka_unit_test(test_builtin_fragments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
