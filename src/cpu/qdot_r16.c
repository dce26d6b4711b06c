/* qdot_r16.c -- the r16 layout's byte moves (qdot_r16.h); the kernel is qdot_r16_avx512vnni.c. */
#include <string.h>

#include "cpu/qdot.h"
#include "cpu/qdot_r16.h"

int tq_r16_format(int id)
{
    return id == TQ_GGML_Q4_0 || id == TQ_GGML_Q4_1 || id == TQ_GGML_Q8_0;
}

/* a block's header bytes (d; Q4_1 d, m), quant bytes, and the XOR of the stored quant bytes */
static void geom(int id, size_t *hb, size_t *qb, uint8_t *x)
{
    *hb = id == TQ_GGML_Q4_1 ? 4 : 2;
    *qb = id == TQ_GGML_Q8_0 ? 32 : 16;
    *x = id == TQ_GGML_Q8_0 ? 0x80 : 0;
}

/* file block (row r of the group at g, block b of nb) <-> its places in the group; dir 1: pack */
static void move_block(int id, uint8_t *blk, uint8_t *g, int64_t nb, int64_t b, int r, int dir)
{
    size_t hb, qb;
    uint8_t x;
    geom(id, &hb, &qb, &x);
    uint8_t *gq = g + (size_t)b * 16 * qb;                        /* the block's quant dwords */
    uint8_t *gh = g + (size_t)nb * 16 * qb + (size_t)b * 16 * hb; /* its f16 fields       */
    for (size_t h = 0; h < hb; h += 2) {                          /* f16 fields: 16 rows of each */
        uint8_t *f = gh + 16 * h + 2 * (size_t)r;
        if (dir)
            memcpy(f, blk + h, 2);
        else
            memcpy(blk + h, f, 2);
    }
    for (size_t i = 0; i < qb / 4; i++) {
        uint8_t *q = gq + 64 * i + 4 * (size_t)r;
        for (int e = 0; e < 4; e++) {
            if (dir)
                q[e] = blk[hb + 4 * i + (size_t)e] ^ x;
            else
                blk[hb + 4 * i + (size_t)e] = q[e] ^ x;
        }
    }
}

void tq_r16_pack(int id, const uint8_t *src, int64_t nb, uint8_t *dst)
{
    const size_t bs = tq_ggml_type_size(id), rb = (size_t)nb * bs;
    uint8_t blk[34];
    for (int r = 0; r < TQ_R16; r++)
        for (int64_t b = 0; b < nb; b++) {
            memcpy(blk, src + (size_t)r * rb + (size_t)b * bs, bs);
            move_block(id, blk, dst, nb, b, r, 1);
        }
}

void tq_r16_unpack_row(int id, const uint8_t *g, int64_t nb, int r, uint8_t *dst)
{
    const size_t bs = tq_ggml_type_size(id);
    for (int64_t b = 0; b < nb; b++)
        move_block(id, dst + (size_t)b * bs, (uint8_t *)(uintptr_t)g, nb, b, r, 0);
}

void tq_r16_unpack(int id, const uint8_t *src, int64_t nb, uint8_t *dst)
{
    if (tq_qdot_avx512()) { /* r16 matrices exist only there; the scalar moves are the spec */
        tq_r16_unpack_avx512(id, src, nb, dst);
        return;
    }
    const size_t rb = (size_t)nb * tq_ggml_type_size(id);
    for (int r = 0; r < TQ_R16; r++)
        tq_r16_unpack_row(id, src, nb, r, dst + (size_t)r * rb);
}

tq_qmv_q8_fn tq_r16_mv(int id)
{
    return tq_qdot_avx512() ? tq_r16_mv_avx512(id) : NULL;
}
