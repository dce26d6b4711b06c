/* rng.h -- small seeded generator for tests, benches and sampling (splitmix64 + xoshiro256**).
 * Same seed, same stream, on every machine. */
#ifndef TQ_RNG_H
#define TQ_RNG_H

#include <math.h>
#include <stdint.h>

typedef struct tq_rng {
    uint64_t s[4];
} tq_rng;

static inline uint64_t tq_splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline void tq_rng_seed(tq_rng *r, uint64_t seed)
{
    for (int i = 0; i < 4; i++)
        r->s[i] = tq_splitmix64(&seed);
}

static inline uint64_t tq_rng_u64(tq_rng *r)
{
    uint64_t *s = r->s;
    const uint64_t res = ((s[1] * 5) << 7 | (s[1] * 5) >> 57) * 9;
    const uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = (s[3] << 45) | (s[3] >> 19);
    return res;
}

/* uniform in [0, 1) with 24 random bits */
static inline float tq_rng_uniform(tq_rng *r)
{
    return (float)(tq_rng_u64(r) >> 40) * (1.0f / 16777216.0f);
}

/* standard normal (Box-Muller in double, one value per call) */
static inline float tq_rng_normal(tq_rng *r)
{
    double u1 = ((double)(tq_rng_u64(r) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
    double u2 = (double)(tq_rng_u64(r) >> 11) * (1.0 / 9007199254740992.0);
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

#endif /* TQ_RNG_H */
