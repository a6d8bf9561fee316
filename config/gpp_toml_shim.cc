// gpp_toml_shim: toml++ behind the C API of gpp_toml_shim.h. toml++ is built
// with exceptions, so every parse is wrapped; nothing C++ leaks out.
// common/gpp_err.h has no extern "C" guard of its own.
extern "C" {
#include "common/gpp_err.h"
}
#include "config/gpp_toml_shim.h"

#include <cassert>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>
#include <string>

#include <toml++/toml.h>

struct gpp_toml {
    toml::table root;
};

namespace
{

const toml::node *s_node(const gpp_toml_node_t *n)
{
    return reinterpret_cast<const toml::node *>(n);
}
const gpp_toml_node_t *s_handle(const toml::node *n)
{
    return reinterpret_cast<const gpp_toml_node_t *>(n);
}

gpp_toml_t *s_parse(const std::string &text, const char *name, gpp_err_t *err)
{
    try {
        auto *doc = new gpp_toml;
        try {
            doc->root = toml::parse(text, std::string_view(name));
        } catch (...) {
            delete doc;
            throw;
        }
        return doc;
    } catch (const toml::parse_error &e) {
        const auto &b = e.source().begin;
        gpp_err_set(err, "%s:%u:%u: %.*s", name, (unsigned)b.line, (unsigned)b.column,
                    (int)e.description().size(), e.description().data());
    } catch (const std::exception &e) {
        gpp_err_set(err, "%s: %s", name, e.what());
    }
    return nullptr;
}

} // namespace

extern "C" {

gpp_toml_t *gpp_toml_parse_string(const char *text, const char *name, gpp_err_t *err)
{
    assert(text && name);
    return s_parse(std::string(text), name, err);
}

gpp_toml_t *gpp_toml_parse_file(const char *path, gpp_err_t *err)
{
    assert(path);
    FILE *f = fopen(path, "rb");
    if (!f) {
        gpp_err_set(err, "%s: cannot open: %s", path, strerror(errno));
        return nullptr;
    }
    std::string text;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        text.append(buf, n);
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        gpp_err_set(err, "%s: read error", path);
        return nullptr;
    }
    return s_parse(text, path, err);
}

void gpp_toml_destroy(gpp_toml_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    delete *self_p;
    *self_p = nullptr;
}

const gpp_toml_node_t *gpp_toml_root(const gpp_toml_t *doc)
{
    assert(doc);
    return s_handle(&doc->root);
}

gpp_toml_kind_t gpp_toml_kind(const gpp_toml_node_t *h)
{
    switch (s_node(h)->type()) {
    case toml::node_type::table:
        return GPP_TOML_TABLE;
    case toml::node_type::array:
        return GPP_TOML_ARRAY;
    case toml::node_type::string:
        return GPP_TOML_STRING;
    case toml::node_type::integer:
        return GPP_TOML_INT;
    case toml::node_type::floating_point:
        return GPP_TOML_FLOAT;
    case toml::node_type::boolean:
        return GPP_TOML_BOOL;
    default:
        return GPP_TOML_DATETIME;
    }
}

const char *gpp_toml_kind_name(gpp_toml_kind_t k)
{
    static const char *const names[] = {"table", "array",   "string",   "integer",
                                        "float", "boolean", "date/time"};
    return (unsigned)k < sizeof names / sizeof names[0] ? names[k] : "?";
}

void gpp_toml_pos(const gpp_toml_node_t *h, int *line, int *col)
{
    const auto &b = s_node(h)->source().begin;
    *line = (int)b.line;
    *col = (int)b.column;
}

size_t gpp_toml_table_size(const gpp_toml_node_t *h)
{
    const toml::table *t = s_node(h)->as_table();
    assert(t);
    return t->size();
}

const gpp_toml_node_t *gpp_toml_table_at(const gpp_toml_node_t *h, size_t i, const char **key_out,
                                         int *key_line, int *key_col)
{
    const toml::table *t = s_node(h)->as_table();
    assert(t && i < t->size());
    auto it = t->cbegin();
    std::advance(it, (std::ptrdiff_t)i);
    // toml::key stores its text as std::string: c_str() is NUL-terminated
    // and lives as long as the document.
    *key_out = it->first.str().data();
    *key_line = (int)it->first.source().begin.line;
    *key_col = (int)it->first.source().begin.column;
    return s_handle(&it->second);
}

size_t gpp_toml_array_size(const gpp_toml_node_t *h)
{
    const toml::array *a = s_node(h)->as_array();
    assert(a);
    return a->size();
}

const gpp_toml_node_t *gpp_toml_array_at(const gpp_toml_node_t *h, size_t i)
{
    const toml::array *a = s_node(h)->as_array();
    assert(a && i < a->size());
    return s_handle(a->get(i));
}

const char *gpp_toml_string(const gpp_toml_node_t *h, size_t *len_out)
{
    const auto *v = s_node(h)->as_string();
    assert(v);
    if (len_out)
        *len_out = v->get().size();
    return v->get().c_str();
}

int64_t gpp_toml_int(const gpp_toml_node_t *h)
{
    const auto *v = s_node(h)->as_integer();
    assert(v);
    return v->get();
}

double gpp_toml_float(const gpp_toml_node_t *h)
{
    const auto *v = s_node(h)->as_floating_point();
    assert(v);
    return v->get();
}

int gpp_toml_bool(const gpp_toml_node_t *h)
{
    const auto *v = s_node(h)->as_boolean();
    assert(v);
    return v->get() ? 1 : 0;
}

} // extern "C"
