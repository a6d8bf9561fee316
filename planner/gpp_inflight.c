/* gpp_inflight: the appendix ComputeInFlight table (see gpp_part.h): samples
 * in flight of a kFkB stage before a successor of its own k and micro-batch. */
#include <assert.h>

#include "planner/gpp_part.h"

static int s_cif_all(int kx, int bx, int ky, int by, int iy, int vals[10])
{
    int X = kx * bx, Y = ky * by, bmax = bx > by ? bx : by;
    int cond[10] = {
        bmax < X && X < Y,
        bmax == X && X < Y,
        bx <= by && by < Y && Y < X,
        bx <= by && by == Y && Y < X,
        by <= bx && bx < Y && Y < X,
        by <= bx && bx == Y && Y < X,
        bmax == Y && Y == X,
        bmax < Y && Y == X,
        bx <= X && X < by && by <= Y,
        by <= Y && Y < bx && bx <= X,
    };
    int res[10] = {
        iy + 2 * bmax, iy + bmax, iy + X - Y + 2 * by, iy + X,  iy + X - Y + 2 * bx,
        iy + X,        iy + Y,    iy + 2 * bmax,       iy + by, iy + X - Y + bx,
    };
    int mask = 0;
    for (int r = 0; r < 10; r++) {
        vals[r] = res[r];
        if (cond[r])
            mask |= 1 << r;
    }
    return mask;
}

int gpp_part_inflight_matches(int kx, int bx, int ky, int by)
{
    int v[10];
    return __builtin_popcount((unsigned)s_cif_all(kx, bx, ky, by, 0, v));
}

int gpp_part_inflight(int kx, int bx, int ky, int by, int iy, int *row_out)
{
    assert(kx >= 1 && bx >= 1 && ky >= 1 && by >= 1 && iy >= 0);
    int v[10];
    int mask = s_cif_all(kx, bx, ky, by, iy, v);
    assert(mask != 0 && "ComputeInFlight: no table row matches");
    int row = __builtin_ctz((unsigned)mask);
    for (int r = row + 1; r < 10; r++)
        assert(!(mask >> r & 1) || v[r] == v[row]);
    if (row_out)
        *row_out = row + 1;
    return v[row];
}
