/* pool.c -- a small fork-join thread pool: mutex + condition variables, no spin-polling.
 * tq_pool_run() wakes every worker with a new generation number, runs slice 0 on the caller and
 * waits until all workers report done. Work is split by (ith, nth) only, so results never depend
 * on scheduling. */
#include <pthread.h>
#include <unistd.h>

#include "core/core.h"

struct tq_pool {
    int n;                   /* threads per job, caller included            */
    pthread_t *threads;      /* (n - 1) workers                             */
    pthread_mutex_t mu;
    pthread_cond_t wake;     /* workers wait here for a new generation      */
    pthread_cond_t done;     /* caller waits here for pending == 0          */
    uint64_t generation;     /* bumped once per job                         */
    int pending;             /* workers still running the current job       */
    int quit;
    tq_task_fn fn;
    void *ctx;
};

typedef struct worker_arg {
    tq_pool *pool;
    int ith;
} worker_arg;

static void *worker_main(void *arg)
{
    worker_arg wa = *(worker_arg *)arg;
    tq_pool *p = wa.pool;
    uint64_t seen = 0;
    tq_free(arg);
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->quit && p->generation == seen)
            pthread_cond_wait(&p->wake, &p->mu);
        if (p->quit)
            break;
        seen = p->generation;
        tq_task_fn fn = p->fn;
        void *ctx = p->ctx;
        pthread_mutex_unlock(&p->mu);
        fn(ctx, wa.ith, p->n);
        pthread_mutex_lock(&p->mu);
        if (--p->pending == 0)
            pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
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
    p->quit = 1;
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
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->ctx = ctx;
    p->pending = p->n - 1;
    p->generation++;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    fn(ctx, 0, p->n);
    pthread_mutex_lock(&p->mu);
    while (p->pending > 0)
        pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}
