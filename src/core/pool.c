/* pool.c -- a small fork-join thread pool. tq_pool_run() publishes a job by bumping an atomic
 * generation number, runs slice 0 on the caller and waits until every worker reports done.
 * Between jobs a worker spins on the generation for tq_pool_set_default_spin() pause
 * iterations (default 2000; the tool's TQ_POOL_SPIN), then sleeps on a condition variable, so an idle pool costs no CPU. Decode issues a job
 * every few tens of microseconds; a futex wake-up per job cost as much as the second thread
 * saved (SmolLM2 decode, 2 threads, quiet box: 42-47 tok/s sleeping at once, 78-81 with 2000,
 * 82-85 with 20000; 1 thread 41-42). On an oversubscribed box spinning hurts (2000: -7 %,
 * 4000: -37 % in one loaded run), hence the short default; 0 always sleeps.
 * The caller waits for the last worker the same way. Work is split by (ith, nth) only, so
 * results never depend on scheduling. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() ((void)0)
#endif

#include "core/core.h"

enum { DEFAULT_SPIN = 2000 }; /* pause iterations (~10-50 us): see the measurements above */
static _Atomic int default_spin = DEFAULT_SPIN; /* tq_pool_set_default_spin()               */

void tq_pool_set_default_spin(int spin)
{
    atomic_store_explicit(&default_spin, spin < 0 ? DEFAULT_SPIN : spin, memory_order_relaxed);
}

struct tq_pool {
    int n;                       /* threads per job, caller included                        */
    int spin;                    /* pause iterations before sleeping                         */
    pthread_t *threads;          /* (n - 1) workers                                          */
    pthread_mutex_t mu;
    pthread_cond_t wake;         /* sleeping workers wait here for a new generation          */
    pthread_cond_t done;         /* a sleeping caller waits here for pending == 0            */
    _Atomic uint64_t generation; /* bumped once per job (release); fn/ctx published by it    */
    _Atomic int pending;         /* workers still running the current job                    */
    _Atomic int quit;
    tq_task_fn fn;
    void *ctx;
};

typedef struct worker_arg {
    tq_pool *pool;
    int ith;
} worker_arg;

/* wait_new_job() -- spin, then sleep, until the generation moves past `seen` or quit is set. */
static uint64_t wait_new_job(tq_pool *p, uint64_t seen)
{
    uint64_t g;
    for (int i = 0; i < p->spin; i++) {
        g = atomic_load_explicit(&p->generation, memory_order_acquire);
        if (g != seen || atomic_load_explicit(&p->quit, memory_order_relaxed))
            return g;
        cpu_relax();
    }
    pthread_mutex_lock(&p->mu);
    while ((g = atomic_load_explicit(&p->generation, memory_order_acquire)) == seen &&
           !atomic_load_explicit(&p->quit, memory_order_relaxed))
        pthread_cond_wait(&p->wake, &p->mu);
    pthread_mutex_unlock(&p->mu);
    return g;
}

static void *worker_main(void *arg)
{
    worker_arg wa = *(worker_arg *)arg;
    tq_pool *p = wa.pool;
    uint64_t seen = 0;
    tq_free(arg);
    for (;;) {
        seen = wait_new_job(p, seen);
        if (atomic_load_explicit(&p->quit, memory_order_acquire))
            break;
        p->fn(p->ctx, wa.ith, p->n);
        if (atomic_fetch_sub_explicit(&p->pending, 1, memory_order_acq_rel) == 1) {
            pthread_mutex_lock(&p->mu); /* the caller may be asleep: wake it under the lock */
            pthread_cond_signal(&p->done);
            pthread_mutex_unlock(&p->mu);
        }
    }
    return NULL;
}

tq_status tq_pool_create(int n_threads, tq_pool **out)
{
    if (!out)
        return TQ_FAIL(TQ_E_ARG, "tq_pool_create: out is NULL");
    *out = NULL;
    if (n_threads <= 0) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        n_threads = c > 0 ? (int)c : 1;
    }
    if (n_threads > 1024)
        return TQ_FAIL(TQ_E_ARG, "tq_pool_create: %d threads is more than 1024", n_threads);
    tq_pool *p = tq_calloc(1, sizeof(*p));
    if (!p)
        return TQ_FAIL(TQ_E_NOMEM, "tq_pool_create: out of memory");
    p->n = n_threads;
    p->spin = atomic_load_explicit(&default_spin, memory_order_relaxed);
    atomic_init(&p->generation, 0);
    atomic_init(&p->pending, 0);
    atomic_init(&p->quit, 0);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done, NULL);
    if (n_threads > 1) {
        p->threads = tq_calloc((size_t)n_threads - 1, sizeof(pthread_t));
        if (!p->threads)
            goto out_free;
        for (int i = 1; i < n_threads; i++) {
            worker_arg *wa = tq_malloc(sizeof(*wa));
            if (wa) {
                wa->pool = p;
                wa->ith = i;
            }
            if (!wa || pthread_create(&p->threads[i - 1], NULL, worker_main, wa) != 0) {
                tq_free(wa);
                p->n = i; /* join only the ones started */
                tq_pool_free(p);
                return TQ_FAIL(TQ_E_NOMEM, "tq_pool_create: could not start thread %d", i);
            }
        }
    }
    *out = p;
    return TQ_OK;
out_free:
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->done);
    tq_free(p);
    return TQ_FAIL(TQ_E_NOMEM, "tq_pool_create: out of memory");
}

void tq_pool_free(tq_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    atomic_store_explicit(&p->quit, 1, memory_order_release);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n; i++)
        pthread_join(p->threads[i - 1], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->done);
    tq_free(p->threads);
    tq_free(p);
}

int tq_pool_size(const tq_pool *p)
{
    return p ? p->n : 1;
}

void tq_pool_run(tq_pool *p, tq_task_fn fn, void *ctx)
{
    if (!p || p->n == 1) {
        fn(ctx, 0, 1);
        return;
    }
    p->fn = fn;
    p->ctx = ctx;
    atomic_store_explicit(&p->pending, p->n - 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&p->generation, 1, memory_order_release);
    /* Sleeping workers check the generation under the mutex, so taking it here before the
     * broadcast means none can miss this job. */
    pthread_mutex_lock(&p->mu);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    fn(ctx, 0, p->n);
    for (int i = 0; i < p->spin; i++) {
        if (atomic_load_explicit(&p->pending, memory_order_acquire) == 0)
            return;
        cpu_relax();
    }
    pthread_mutex_lock(&p->mu);
    while (atomic_load_explicit(&p->pending, memory_order_acquire) > 0)
        pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}
