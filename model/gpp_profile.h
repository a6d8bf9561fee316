/* gpp_profile: a measured op profile in memory, the one form per-op
 * timings take from the agents' timer to the cost model.
 *
 * Ops carry what the GraphPipe authors' profile.json says of an op (name,
 * inputs, bytes); rows carry one (op, micro-batch) measurement each, with
 * the backend's memory figures repeated in every row of an op, as the wire
 * (proto OpProfile) carries them. Made by the profiler
 * (agent/exec/gpp_profile.h), gpp_profile_of_graph (the agents' rows) or
 * the reader (planner/gpp_profile_io.h); used by the cost model
 * (gpp_cost_attach_profile), the writer and the importer
 * (model/gpp_profile_graph.h). gpp_profile_check is the one check of its
 * figures, whichever way they came.
 *
 * Ownership: gpp_profile_new and gpp_profile_of_graph return a profile the
 * caller owns (gpp_profile_destroy); it owns its arrays. */
#ifndef GPP_MODEL_PROFILE_H
#define GPP_MODEL_PROFILE_H

#include <stddef.h>
#include <stdint.h>

#include "common/gpp_err.h"
#include "common/gpp_precision.h"
#include "model/gpp_graph.h"
#include "model/gpp_optable.h" /* gpp_work_t */

#define GPP_PROFILE_MAX_MB (1 << 24) /* the largest micro-batch size a table holds */
/* The largest byte figure a profile may hold: 1 TiB, over ten times the
 * largest preset's memory, so that every figure derived from it stays exact
 * in int64 and double. */
#define GPP_PROFILE_MAX_BYTES 1099511627776.0

/* One measured (op, micro-batch) figure. */
typedef struct {
    int op;          /* the op's id in the profile (gpp's: the model's op index) */
    int micro_batch; /* samples, 1..GPP_PROFILE_MAX_MB */
    double ms;       /* forward + backward ("runtime"), >= 0 */
    int has_fwd;     /* the forward alone was measured, in every row of the op or none
                        (without it the cost model takes a third of ms) */
    double fwd_ms;   /* forward ("forward"), 0..ms */
    /* the backend's figures, when has_: the same in every row of an op */
    int has_kernel_stash;
    int64_t kernel_stash; /* bytes per sample the forward kernel keeps for the backward */
    int has_workspace;
    gpp_work_t workspace; /* stream workspace for n samples: fixed + n x per_sample bytes */
    int has_out_bytes;
    int64_t out_bytes; /* bytes per sample of the output as the backend keeps it, >= 1 */
} gpp_profile_row_t;

/* One profiled op. */
typedef struct {
    int id;                  /* 0..1e9, ascending in a profile */
    char name[GPP_NAME_LEN]; /* non-empty */
    int n_inputs;
    int *inputs;         /* [n_inputs] producer ids (may name ids the profile lacks) */
    double *input_bytes; /* [n_inputs] bytes per sample of each ("input_size") */
    int has_weight;
    double weight_bytes; /* "weight_size": parameter bytes */
    /* "reserved_mem": a table of n_reserved (micro-batch, bytes) points,
       ascending, or with n_reserved 0 reserved_bytes at every size */
    int64_t reserved_bytes;
    int n_reserved;
    int *reserved_mbs;
    double *reserved_at;
} gpp_profile_op_t;

/* What was measured where (profile.json's "_gpp" record). */
typedef struct {
    int present;       /* a file's record was there (the authors' files have none) */
    char model[1024];  /* model spec; "" unknown */
    char device[256];  /* the device's own name, or a cluster preset; "" unknown */
    int n_ops;         /* the model's op count; -1 unknown */
    char backend[32];  /* "cpu" | "cuda:N"; "" unknown */
    int has_precision; /* else fp32 is assumed */
    gpp_precision_t precision;
    int has_bf16_tensors; /* else 0 (fp32 tensors) is assumed */
    int bf16_tensors;     /* 1: the backend kept bf16 activations */
} gpp_profile_meta_t;

typedef struct {
    char origin[256]; /* the file, or what made it ("the agents' profile"), for messages */
    gpp_profile_meta_t meta;
    int n_ops;
    gpp_profile_op_t *ops;
    size_t n_rows;
    gpp_profile_row_t *rows;
    int cap_ops;
    size_t cap_rows;
} gpp_profile_t;

/* An empty profile (meta unknown). */
gpp_profile_t *gpp_profile_new(const char *origin);
void gpp_profile_destroy(gpp_profile_t **self_p);
/* Appends an op with id and name, every other field 0; the pointer holds
 * until the next add. Arrays the caller sets are owned by the profile. */
gpp_profile_op_t *gpp_profile_add_op(gpp_profile_t *p, int id, const char *name);
void gpp_profile_add_row(gpp_profile_t *p, const gpp_profile_row_t *r);
/* The op with that id, or NULL. */
const gpp_profile_op_t *gpp_profile_op(const gpp_profile_t *p, int id);

/* The one check: ids ascending and in range; every row's op present, its
 * size 1..GPP_PROFILE_MAX_MB and listed once per op, its times finite,
 * forward within forward + backward, its figures in range and the same in
 * every row of the op; reserved tables sorted, their sizes in range. 0, or
 * -1 with "ORIGIN: op ID (NAME): what; fix" in err. */
int gpp_profile_check(const gpp_profile_t *p, gpp_err_t *err);

/* The profile of rows measured on graph g (rows' op: g's op index): an op
 * per op with rows, named as in g, its inputs and their fp32 bytes, its
 * parameter bytes. Checked (gpp_profile_check); NULL with a message when a
 * row names no op of g or fails the check. */
gpp_profile_t *gpp_profile_of_graph(const gpp_graph_t *g, const gpp_profile_row_t *rows,
                                    size_t n_rows, const char *origin, gpp_err_t *err);

#endif
