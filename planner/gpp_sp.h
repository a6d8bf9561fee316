/* gpp_sp: series-parallel (SP) decomposition tree of a model graph.
 *
 * Every op is exactly one LEAF. SERIES nodes have >= 2 ordered children and
 * no SERIES child; PARALLEL nodes have >= 2 unordered branches (kept in
 * order of their smallest op id) and no PARALLEL branch. Fork and join ops
 * are lifted into the enclosing series: a residual block x -> ln -> attn ->
 * add(x, attn) is SERIES[x, ln, attn, add]; branches b1, b2 between a fork f
 * and a join j are SERIES[f, PARALLEL[b1, b2], j].
 *
 * Contract the partitioner relies on: for every graph edge u -> v the lowest
 * common ancestor of the two leaves is a SERIES node in which u's child comes
 * before v's child. Non-SP graphs are made SP by adding dependencies (a
 * series cut between op sets that were not fully ordered), never by dropping
 * one; multiple sources and sinks need no virtual ops.
 *
 * Leaves are numbered in depth-first order ("positions"), so every node, every
 * contiguous range of a series node's children and every contiguous range of a
 * parallel node's branches covers a contiguous range of positions.
 *
 * Ownership: gpp_sp_build / gpp_sp_linear return a tree the caller owns;
 * free with gpp_sp_destroy. */
#ifndef GPP_SP_H
#define GPP_SP_H

#include <stdio.h>

#include "common/gpp_err.h"
#include "model/gpp_graph.h"

typedef enum { GPP_SP_LEAF = 0, GPP_SP_SERIES, GPP_SP_PARALLEL } gpp_sp_kind_t;

typedef struct {
    gpp_sp_kind_t kind;
    int op; /* LEAF: op id; -1 else */
    int n_children;
    int *children;   /* node indices, in series order / branch order */
    int first, last; /* leaf positions covered, inclusive */
    int parent;      /* -1 for the root */
} gpp_sp_node_t;

typedef struct {
    int n_nodes;
    gpp_sp_node_t *nodes;
    int root;
    int n_ops;
    int *op_at;     /* [n_ops]: op id at each leaf position */
    int *pos_of;    /* [n_ops]: leaf position of each op id */
    int added_cuts; /* series cuts that added dependencies (0 for SP graphs) */
} gpp_sp_t;

/* Decomposes a finalized graph. Returns NULL with a message on failure. */
gpp_sp_t *gpp_sp_build(const gpp_graph_t *g, gpp_err_t *err);
/* The SPP view: one SERIES of all ops in id (topological) order. */
gpp_sp_t *gpp_sp_linear(const gpp_graph_t *g);
void gpp_sp_destroy(gpp_sp_t **self_p);

/* Checks the contract above (each op once, positions, every edge ordered by
 * a SERIES lowest common ancestor). Returns 0, or -1 naming the first
 * violation. */
int gpp_sp_check(const gpp_sp_t *t, const gpp_graph_t *g, gpp_err_t *err);
/* One line per node, indented: "S", "P" or the op name. */
void gpp_sp_print(const gpp_sp_t *t, const gpp_graph_t *g, FILE *out);

#endif
