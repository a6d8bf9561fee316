/* gpp_toml_shim: a read-only C view of a TOML document parsed by toml++
 * (C++17, config/gpp_toml_shim.cc). Only gpp_config uses it; it knows
 * nothing about gpp's schema.
 *
 * Nodes are borrowed pointers into the document: valid until
 * gpp_toml_destroy(). Every node and every table key carries its source
 * position (1-based line and column) for error messages. */
#ifndef GPP_TOML_SHIM_H
#define GPP_TOML_SHIM_H

#include <stddef.h>
#include <stdint.h>

#include "common/gpp_err.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gpp_toml gpp_toml_t;
typedef struct gpp_toml_node gpp_toml_node_t;

typedef enum {
    GPP_TOML_TABLE = 0,
    GPP_TOML_ARRAY,
    GPP_TOML_STRING,
    GPP_TOML_INT,
    GPP_TOML_FLOAT,
    GPP_TOML_BOOL,
    GPP_TOML_DATETIME, /* date, time or date-time: gpp uses none */
} gpp_toml_kind_t;

/* Parses a file. Caller owns the result (gpp_toml_destroy). On a syntax
 * error returns NULL with "PATH:LINE:COL: <toml++ description>" in err. */
gpp_toml_t *gpp_toml_parse_file(const char *path, gpp_err_t *err);
/* Same for text in memory; `name` stands for the path in messages. */
gpp_toml_t *gpp_toml_parse_string(const char *text, const char *name, gpp_err_t *err);
void gpp_toml_destroy(gpp_toml_t **self_p);

const gpp_toml_node_t *gpp_toml_root(const gpp_toml_t *doc);
gpp_toml_kind_t gpp_toml_kind(const gpp_toml_node_t *n);
/* "table", "array", "string", "integer", "float", "boolean", "date/time". */
const char *gpp_toml_kind_name(gpp_toml_kind_t k);
void gpp_toml_pos(const gpp_toml_node_t *n, int *line, int *col);

/* Tables: keys in the order toml++ keeps them (sorted). i < table_size.
 * key_out receives a borrowed NUL-terminated key, key_line/col its position. */
size_t gpp_toml_table_size(const gpp_toml_node_t *table);
const gpp_toml_node_t *gpp_toml_table_at(const gpp_toml_node_t *table, size_t i,
                                         const char **key_out, int *key_line, int *key_col);

size_t gpp_toml_array_size(const gpp_toml_node_t *array);
const gpp_toml_node_t *gpp_toml_array_at(const gpp_toml_node_t *array, size_t i);

/* Scalars; the node must be of that kind (assert). A TOML string may hold
 * "\u0000": *len_out (if not NULL) is its true length in bytes. */
const char *gpp_toml_string(const gpp_toml_node_t *n, size_t *len_out);
int64_t gpp_toml_int(const gpp_toml_node_t *n);
double gpp_toml_float(const gpp_toml_node_t *n);
int gpp_toml_bool(const gpp_toml_node_t *n);

#ifdef __cplusplus
}
#endif
#endif
