/* serve.h -- what the parts of `tq serve` share: the server state, a request as the scheduler
 * sees it, and the entry points of tools/serve_sched.c (the scheduler thread that runs every
 * model step) and tools/serve_http.c (libmicrohttpd handlers, JSON in and out).
 *
 * Threads: libmicrohttpd runs one thread per connection; those threads parse and validate a
 * request, tokenize it (the tokenizer is thread-safe) and hand it to the scheduler, which is the
 * only thread that touches the model and the sessions. Everything the two sides share is under
 * srv.mu; each request has its own condition variable that the scheduler signals when it has new
 * text or is finished. */
#ifndef TQ_SERVE_H
#define TQ_SERVE_H

#include <pthread.h>
#include <stdarg.h>

#include "cli.h"

#define SRV_MAX_STOP 16        /* stop strings per request                          */
#define SRV_DEFAULT_BODY (1 << 20) /* default --max-body: 1 MiB                      */
#define SRV_MAX_TOP_LOGPROBS 20  /* top_logprobs at most (OpenAI's limit)              */

/* Why a request ended. */
typedef enum srv_finish {
    SRV_RUNNING = 0,
    SRV_FIN_STOP = 1,   /* end of turn / EOS, or a stop string                 */
    SRV_FIN_LENGTH = 2, /* max_tokens, or the context is full                  */
    SRV_FIN_ERROR = 3,  /* engine error or shutdown: err says what             */
    SRV_FIN_CANCEL = 4, /* the client went away                                */
} srv_finish;

/* One generation request. Made by the HTTP side (srv_req_new), owned by whoever holds the last
 * reference: the HTTP thread holds one, the scheduler one from srv_submit() to the end. */
typedef struct srv_req {
    /* input: written before srv_submit(), read-only afterwards */
    int32_t *prompt;        /* n_prompt token ids (malloc'd)                               */
    int64_t n_prompt;
    tq_sampler *sampler;    /* made from the request's settings (owned)                    */
    int64_t max_tokens;     /* new tokens at most                                          */
    char *stop[SRV_MAX_STOP]; /* stop strings (malloc'd)                                   */
    int n_stop;
    int ignore_eos;
    int return_tokens;      /* extension: also return the completion's token ids            */
    int logprobs;           /* return log-probabilities of the completion's tokens           */
    int top_n;              /* ... and of the top_n most likely tokens at each step (<= 20)  */
    /* output: under srv.mu */
    char *text;             /* published text: complete, never containing a stop string    */
    size_t n_text, cap_text;
    int64_t n_gen;          /* completion tokens (an EOS that stopped it not counted)       */
    int32_t *toks;          /* their ids (max_tokens entries, malloc'd by the HTTP side)    */
    /* with logprobs (malloc'd by the HTTP side, max_tokens entries; top_* x top_n): written by
     * the scheduler at index n_gen before it publishes n_gen + 1, read below n_gen under mu */
    float *lp;              /* log p of each completion token under the raw logits          */
    int32_t *top_id;        /* the top_n most likely ids at each step, descending           */
    float *top_lp;          /* their log p                                                  */
    int64_t n_cached;       /* prompt tokens reused from a slot's cache                     */
    srv_finish finish;      /* SRV_RUNNING until done                                       */
    char err[256];          /* message for SRV_FIN_ERROR                                    */
    int cancel;             /* set by the HTTP side: the client disconnected                */
    int refs;
    double t_submit, t_first, t_done; /* monotonic seconds                                  */
    pthread_cond_t cv;      /* signalled on new text and at the end                         */
    struct srv_req *next;   /* queue link                                                   */
} srv_req;

typedef struct srv_slot srv_slot; /* serve_sched.c */

/* Settings from the command line. */
typedef struct srv_opts {
    const char *model;      /* -m                                                          */
    const char *tokenizer;  /* --tokenizer (default: from the model)                       */
    const char *alias;      /* --alias: the model id clients use (default: file name)      */
    const char *host;       /* --host                                                      */
    int port;               /* --port (0 = any free port, printed)                         */
    const char *kv;         /* --kv                                                        */
    long ctx;               /* --ctx per sequence                                          */
    int parallel;           /* --parallel sequences (0 = as many as fit, at most 8)        */
    int threads;            /* --threads                                                   */
    tq_model_opts wopts;    /* --weights: weight_store, weight_type, native_f32_act only    */
    const char *api_key;    /* --api-key                                                   */
    int max_queue;          /* --max-queue                                                 */
    int timeout;            /* --timeout: idle connection seconds                          */
    size_t max_body;        /* --max-body bytes                                            */
    size_t kv_mem;          /* --kv-mem bytes (0 = 90% of MemAvailable)                    */
    int chunk;              /* --chunk: prompt tokens per scheduler step                   */
    int chunk_busy;         /* --chunk-decoding: ... while a sequence is decoding          */
    const char *chat_format;/* --chat-format (default: from the model's template)          */
    const char *cache_dir;  /* --prompt-cache-dir: slot-N.tqkv snapshots, restored at start */
    int cache_min;          /* --prompt-cache-min: prompts of at least this many tokens are
                             * snapshotted when their request ends                         */
} srv_opts;

typedef struct srv {
    srv_opts o;
    char model_id[256];
    /* loaded before ready is set; read-only afterwards */
    tq_model *model;
    tq_tokenizer *tok;
    tq_model_info info;
    tq_kv_scheme kv;
    int has_chat;           /* a chat format is known                                       */
    tq_chat_format chat_fmt;
    int n_ctx;
    int n_slots;
    size_t kv_bytes_per_token;
    int32_t eos[4];         /* ids that end a turn                                          */
    int n_eos;
    long created;           /* unix time of the start                                       */
    /* shared, under mu */
    pthread_mutex_t mu;
    pthread_cond_t wake;    /* the scheduler waits here for work                             */
    int ready;              /* 1 once the model is loaded and the scheduler runs            */
    int quit;
    srv_req *q_head, *q_tail;
    int n_queued;
    int n_busy;
    int64_t kv_tokens;      /* tokens held in all slots' caches                             */
    srv_slot *slots;
    /* the batch of one step (scheduler thread only), n_slots entries each */
    tq_session **b_sess;
    const int32_t **b_tok;
    int64_t *b_n;
    srv_slot **b_slot;
    float *b_logits;        /* (n_slots, vocab)                                             */
    int b_rows;             /* sequences in the last step                                    */
    pthread_t sched;
    int sched_started;
    /* metrics, under mu */
    uint64_t m_http[6];     /* responses by status class: [2] = 2xx, [4] = 4xx, [5] = 5xx    */
    uint64_t m_requests;    /* generation requests accepted                                  */
    uint64_t m_prompt_tokens, m_cached_tokens, m_gen_tokens, m_cancelled, m_shed;
    uint64_t m_steps, m_step_seqs; /* forward passes, and the sequences they served            */
    uint64_t m_prompt_chunks, m_multi_prompt; /* prompt chunks in them; passes with several     */
    /* decode-only steps (no prompt chunk) by the number of sequences k = 1..n_slots: count and
     * seconds in tq_batch_eval; k / (seconds / count) = the aggregate decode tok/s at k */
    uint64_t *m_dsteps;
    double *m_dstep_s;
    double b_secs;          /* seconds of the last step's forward pass (scheduler)           */
    double b_work;          /* seconds of the last step outside the forward pass: slot setup,
                             * sampling, detokenizing, stop strings, snapshots (scheduler)   */
    double m_fwd_s;         /* seconds in all forward passes                                 */
    double m_prompt_s;      /* ... of which in passes with a prompt chunk                    */
    double m_work_s;        /* seconds of the scheduler's own work around the passes (b_work
                             * plus admission and publishing under mu)                        */
    double m_idle_s;        /* seconds the scheduler waited with no request in a slot (ended
                             * waits; /metrics adds the one under way, from idle_since)      */
    double idle_since;      /* when the scheduler's current wait began (0: not waiting)      */
    int b_prompts;          /* prompt chunks in the last step (0: decode only)               */
} srv;

/* serve_sched.c */
/* srv_sched_start() -- create the slots' sessions and start the scheduler thread. 0 or an exit
 * code (message printed). */
int srv_sched_start(srv *s);
/* srv_sched_stop() -- end every request with an error, stop and join the thread, free slots. */
void srv_sched_stop(srv *s);
/* srv_req_new() -- an empty request holding one reference. NULL when out of memory. */
srv_req *srv_req_new(void);
/* srv_req_release() -- drop one reference (takes mu itself). */
void srv_req_release(srv *s, srv_req *r);
/* srv_submit() -- queue r (the scheduler takes a reference): 0, or 503 when the queue is full /
 * the server is not ready or stopping. */
int srv_submit(srv *s, srv_req *r);
/* srv_now() -- monotonic seconds. */
double srv_now(void);

/* serve_http.c */
/* srv_http_start() -- listen on host:port; prints the address. 0 or an exit code. */
int srv_http_start(srv *s);
void srv_http_stop(srv *s);

#endif
