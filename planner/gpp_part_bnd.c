/* gpp_part_bnd: the partitioner DP's stage boundaries (gpp_part_impl.h):
 * the bytes and count of the tensors crossing a growing interval of
 * positions, and the join split's head scratch. */
#include "planner/gpp_part_impl.h"

/* Starts an empty interval at l; `row` (0 or 1) picks one of the two stamp
 * rows of `node`'s depth: two boundaries of one entry use different rows. */
void gpp_dp_bnd_start(gpp_dp_t *s, gpp_dp_bnd_t *bd, int l, int node, int row)
{
    bd->l = l;
    bd->r = l - 1;
    bd->bytes = 0;
    bd->n = 0;
    bd->st = ++s->stamp_next;
    bd->stamp =
        s->stamp + (size_t)(2 * s->node_depth[gpp_dp_real(s, node)] + row) * (size_t)s->tree->n_ops;
}

void gpp_dp_bnd_extend(gpp_dp_t *s, gpp_dp_bnd_t *bd, int r)
{
    const double *ob = s->pos_out_bytes;
    while (bd->r < r) {
        int pos = ++bd->r;
        if (s->last_consumer[pos] > pos) {
            bd->bytes += ob[pos];
            bd->n++;
        }
        for (int k = s->in_off[pos]; k < s->in_off[pos + 1]; k++) {
            int pq = s->in_pos[k];
            if (pq < bd->l) {
                if (bd->stamp[pq] != bd->st) {
                    bd->stamp[pq] = bd->st;
                    bd->bytes += ob[pq];
                    bd->n++;
                }
            } else if (s->last_consumer[pq] == pos) {
                bd->bytes -= ob[pq];
                bd->n--;
            }
        }
    }
}

const gpp_dp_bnd_cell_t *gpp_dp_bnd_row(gpp_dp_t *s, int l)
{
    if (!s->bnd_rows)
        return NULL;
    if (!s->bnd_rows[l]) {
        int len = s->tree->n_ops - l;
        gpp_dp_bnd_cell_t *row = gpp_xcalloc((size_t)len, sizeof *row);
        gpp_dp_bnd_t bd = {.l = l, .r = l - 1, .st = ++s->stamp_next, .stamp = s->bnd_stamp};
        for (int i = 0; i < len; i++) {
            gpp_dp_bnd_extend(s, &bd, l + i);
            row[i].bytes = bd.bytes, row[i].n = bd.n;
        }
        s->bnd_rows[l] = row;
    }
    return s->bnd_rows[l];
}

/* Grows the interval to the left down to position l. */
void gpp_dp_bnd_extend_left(gpp_dp_t *s, gpp_dp_bnd_t *bd, int l)
{
    const double *ob = s->pos_out_bytes;
    while (bd->l > l) {
        int pos = --bd->l;
        if (bd->stamp[pos] == bd->st) { /* was an outside producer of the interval */
            bd->stamp[pos] = 0;
            bd->bytes -= ob[pos];
            bd->n--;
        }
        if (s->last_consumer[pos] > bd->r) {
            bd->bytes += ob[pos];
            bd->n++;
        }
        for (int k = s->in_off[pos]; k < s->in_off[pos + 1]; k++) {
            int pq = s->in_pos[k];
            if (bd->stamp[pq] != bd->st) {
                bd->stamp[pq] = bd->st;
                bd->bytes += ob[pq];
                bd->n++;
            }
        }
    }
}

/* Last branch of P before j with an op that reads position pq; -1 for none. */
static int s_last_reader_branch(const gpp_dp_t *s, const gpp_sp_node_t *P, int j, int pq)
{
    const gpp_sp_t *t = s->tree;
    const gpp_op_t *po = &s->g->ops[t->op_at[pq]];
    int bj_first = t->nodes[P->children[j]].first, hmax = -1;
    for (int c = 0; c < po->n_outputs; c++) {
        int cp = t->pos_of[po->outputs[c]];
        if (cp < P->first || cp >= bj_first)
            continue;
        for (int br = j - 1; br > hmax; br--)
            if (cp >= t->nodes[P->children[br]].first) {
                hmax = br;
                break;
            }
    }
    return hmax;
}

static int s_listed(const int *lst, int nl, int pq)
{
    for (int x = 0; x < nl; x++)
        if (lst[3 * x] == pq)
            return 1;
    return 0;
}

/* Appends to the shared-producer list lst (nl entries; returns the new
 * count) the producers outside P that child e of branch j reads and the
 * list lacks: (position, e, last branch before j that reads it). */
static int s_head_list_child(const gpp_dp_t *s, const gpp_sp_node_t *P, int j, int e, int *lst,
                             int nl)
{
    const gpp_sp_t *t = s->tree;
    const gpp_sp_node_t *ce = &t->nodes[t->nodes[P->children[j]].children[e]];
    for (int pos = ce->first; pos <= ce->last; pos++) {
        const gpp_op_t *o = &s->g->ops[t->op_at[pos]];
        for (int k = 0; k < o->n_inputs; k++) {
            int pq = t->pos_of[o->inputs[k]];
            if (pq >= P->first || s_listed(lst, nl, pq))
                continue;
            int *L = lst + 3 * nl++;
            L[0] = pq, L[1] = e, L[2] = s_last_reader_branch(s, P, j, pq);
        }
    }
    return nl;
}

void gpp_dp_head_init(gpp_dp_t *s, int node, int pnode, int j, gpp_dp_head_t *H)
{
    const gpp_sp_t *t = s->tree;
    const gpp_sp_node_t *P = &t->nodes[pnode];
    int nc = P->n_children, off = 0;
    for (int c = 0; c < j; c++)
        off += t->nodes[P->children[c]].n_children;
    H->P = P, H->Bj = &t->nodes[P->children[j]], H->node = node, H->j = j, H->w_low = j;
    size_t dr = (size_t)s->node_depth[gpp_dp_real(s, node)];
    double *db = s->head_bytes + dr * s->head_row_len;
    int *di = s->head_ints + dr * s->head_irow_len;
    int *owner = di + s->head_row_len, *loff = owner + nc, *llen = loff + nc;
    int *lists = di + s->head_row_len + 3 * (size_t)s->head_max_branches, *used = &s->head_used[dr];
    H->w_bytes = db, H->w_n = di;
    H->hd_bytes = db + nc + off, H->hd_n = di + nc + off;
    if (s->head_owner[dr] != pnode) { /* claim the row */
        s->head_owner[dr] = pnode;
        for (int c = 0; c < nc; c++)
            owner[c] = -1;
        *used = 0;
    }
    if (owner[j] != pnode) {
        owner[j] = pnode;
        loff[j] = *used;
        int nl = 0, *lst = lists + 3 * (size_t)loff[j];
        int kj = H->Bj->n_children;
        gpp_dp_bnd_t bd;
        gpp_dp_bnd_start(s, &bd, H->Bj->first, node, 1);
        for (int e = 0; e < kj - 1; e++) {
            const gpp_sp_node_t *ce = &t->nodes[H->Bj->children[e]];
            gpp_dp_bnd_extend(s, &bd, ce->last);
            H->hd_bytes[e] = bd.bytes, H->hd_n[e] = bd.n;
            nl = s_head_list_child(s, P, j, e, lst, nl);
        }
        llen[j] = nl;
        *used += nl;
    }
    H->lst = lists + 3 * (size_t)loff[j];
    H->nl = llen[j];
    gpp_dp_bnd_start(s, &H->w, H->Bj->first, node, 1); /* W(j): empty */
}

/* Boundary of H(h, e) into *bh (bytes and count only). */
void gpp_dp_head_bnd(gpp_dp_t *s, gpp_dp_head_t *H, int h, int e, gpp_dp_bnd_t *bh)
{
    while (H->w_low > h) {
        H->w_low--;
        gpp_dp_bnd_extend_left(s, &H->w, s->tree->nodes[H->P->children[H->w_low]].first);
        H->w_bytes[H->w_low] = H->w.bytes, H->w_n[H->w_low] = H->w.n;
    }
    double bytes = H->hd_bytes[e] + (h < H->j ? H->w_bytes[h] : 0);
    int n = H->hd_n[e] + (h < H->j ? H->w_n[h] : 0);
    for (int x = 0; x < H->nl; x++) {
        const int *L = H->lst + 3 * x;
        if (L[1] <= e && L[2] >= h) {
            bytes -= s->pos_out_bytes[L[0]];
            n--;
        }
    }
    bh->bytes = bytes, bh->n = n;
}
