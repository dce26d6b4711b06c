/* le.h -- little-endian fixed-width fields of the project's own file formats (KV snapshots,
 * teacher dumps: docs/FORMAT.md), byte by byte, so any host reads and writes the same bytes. */
#ifndef TQ_CORE_LE_H
#define TQ_CORE_LE_H
#include <stdint.h>

static inline void tq_le_wr32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static inline void tq_le_wr64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint32_t tq_le_rd32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v |= (uint32_t)p[i] << (8 * i);
    return v;
}
static inline uint64_t tq_le_rd64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

#endif
