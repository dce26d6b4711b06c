/* test_pool.c -- the thread pool: every slice runs exactly once, results are identical for
 * 1, 2, 7 and 16 threads, and many back-to-back jobs do not lose wake-ups, both when workers
 * sleep between jobs (TQ_POOL_SPIN=0) and when they spin first. Run under TSan too. */
#include "core/core.h"
#include "t.h"

typedef struct job {
    int64_t n;
    int64_t *out;
    int *hits;
} job;

static void body(void *ctx, int ith, int nth)
{
    job *j = ctx;
    int64_t a, b;
    tq_split_range(j->n, ith, nth, &a, &b);
    for (int64_t i = a; i < b; i++)
        j->out[i] = i * i + 3;
    __atomic_fetch_add(&j->hits[ith], 1, __ATOMIC_RELAXED);
}

int main(int argc, char **argv)
{
    t_init(argc, argv, "test_pool");
    const int counts[] = {1, 2, 7, 16};
    enum { N = 10007 };
    static int64_t out[N];
    const int spins[] = {0, 3000};
    for (unsigned sp = 0; sp < 2; sp++)
    for (unsigned c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
        tq_pool_set_default_spin(spins[sp]);
        tq_pool *p = NULL;
        CHECK(tq_pool_create(counts[c], &p) == TQ_OK, "create %d (spin %d)", counts[c], spins[sp]);
        CHECK(tq_pool_size(p) == counts[c], "size");
        int hits[16] = {0};
        job j = {N, out, hits};
        for (int rep = 0; rep < 200; rep++) {
            memset(out, 0, sizeof(out));
            tq_pool_run(p, body, &j);
        }
        int ok = 1;
        for (int64_t i = 0; i < N; i++)
            ok &= out[i] == i * i + 3;
        CHECK(ok, "all rows written with %d threads", counts[c]);
        for (int i = 0; i < counts[c]; i++)
            CHECK(hits[i] == 200, "thread %d ran %d of 200 jobs", i, hits[i]);
        tq_pool_free(p);
    }
    tq_pool_free(NULL);
    CHECK(tq_pool_size(NULL) == 1, "NULL pool has one thread");
    return t_done();
}
