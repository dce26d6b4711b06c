/* membw.c -- streaming-read bandwidth of this machine at 1..N threads: the roofline of decode
 * (issue 14). A decode step reads every weight byte once, so tokens/s <= GB/s / bytes per token.
 *
 *   build/release/tests/membw [-m MB] [-r REPS] [-t 1,2]
 *
 * Each thread sums its contiguous share of one buffer (default 256 MB, far beyond the caches)
 * with 4 independent ymm accumulators (AVX2 loads, 128 B per iteration); the buffer is touched
 * once before timing; a round reads at least 1 GB (several passes over a small buffer, which
 * then measures the cache the buffer fits in). Prints per thread count the median and best of
 * REPS rounds in GB/s (10^9 bytes), from the first thread's start to the last thread's end. */
#define _GNU_SOURCE
#include <immintrin.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    const uint8_t *p;
    size_t n;
    int passes;
    pthread_barrier_t *bar;
    uint64_t sink;
    double t0, t1;
} part;

__attribute__((target("avx2"))) static uint64_t sum_avx2(const uint8_t *p, size_t n)
{
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    size_t i = 0;
    for (; i + 128 <= n; i += 128) {
        a0 = _mm256_add_epi64(a0, _mm256_load_si256((const __m256i *)(p + i)));
        a1 = _mm256_add_epi64(a1, _mm256_load_si256((const __m256i *)(p + i + 32)));
        a2 = _mm256_add_epi64(a2, _mm256_load_si256((const __m256i *)(p + i + 64)));
        a3 = _mm256_add_epi64(a3, _mm256_load_si256((const __m256i *)(p + i + 96)));
    }
    a0 = _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3));
    uint64_t s[4];
    _mm256_storeu_si256((__m256i *)s, a0);
    return s[0] + s[1] + s[2] + s[3];
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void *worker(void *arg)
{
    part *pt = arg;
    pthread_barrier_wait(pt->bar);
    pt->t0 = now_s();
    for (int i = 0; i < pt->passes; i++)
        pt->sink += sum_avx2(pt->p, pt->n);
    pt->t1 = now_s();
    return NULL;
}

static int cmp_d(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    size_t mb = 256;
    int reps = 9;
    int threads[8] = {1, 2};
    int nthr = 2;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-m"))
            mb = (size_t)atol(argv[i + 1]);
        else if (!strcmp(argv[i], "-r"))
            reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-t")) {
            nthr = 0;
            for (char *s = argv[i + 1]; *s && nthr < 8;) {
                threads[nthr++] = (int)strtol(s, &s, 10);
                if (*s == ',')
                    s++;
            }
        } else {
            fprintf(stderr, "usage: membw [-m MB] [-r REPS] [-t 1,2]\n");
            return 2;
        }
    }
    if (mb < 1 || reps < 1 || reps > 101) {
        fprintf(stderr, "membw: bad -m or -r\n");
        return 2;
    }
    const size_t n = mb << 20;
    const int passes = mb >= 1024 ? 1 : (int)(1024 / mb); /* >= 1 GB read per round */
    uint8_t *buf = aligned_alloc(4096, n);
    if (!buf) {
        fprintf(stderr, "membw: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < n; i++)
        buf[i] = (uint8_t)(i * 131u);
    printf("streaming read, %zu MB buffer, %d pass(es) per round, %d rounds (GB/s = 1e9 bytes/s)\n", mb,
           passes, reps);
    printf("threads  median GB/s  best GB/s\n");
    uint64_t sink = 0;
    for (int ti = 0; ti < nthr; ti++) {
        const int t = threads[ti] < 1 ? 1 : threads[ti] > 64 ? 64 : threads[ti];
        double gbs[101];
        for (int r = 0; r < reps; r++) {
            pthread_barrier_t bar;
            pthread_barrier_init(&bar, NULL, (unsigned)t);
            part pt[64];
            pthread_t th[64];
            const size_t share = (n / (size_t)t) & ~(size_t)127;
            for (int i = 0; i < t; i++) {
                pt[i] = (part){buf + (size_t)i * share, share, passes, &bar, 0, 0, 0};
                pthread_create(&th[i], NULL, worker, &pt[i]);
            }
            double t0 = 1e300, t1 = 0;
            for (int i = 0; i < t; i++) {
                pthread_join(th[i], NULL);
                sink += pt[i].sink;
                t0 = pt[i].t0 < t0 ? pt[i].t0 : t0;
                t1 = pt[i].t1 > t1 ? pt[i].t1 : t1;
            }
            gbs[r] = (double)share * t * passes / (t1 - t0) / 1e9;
            pthread_barrier_destroy(&bar);
        }
        qsort(gbs, (size_t)reps, sizeof(double), cmp_d);
        printf("%7d  %11.2f  %9.2f\n", t, gbs[reps / 2], gbs[reps - 1]);
    }
    free(buf);
    return sink == 42 ? 3 : 0; /* keep the sums alive */
}
