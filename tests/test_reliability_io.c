/* test_reliability_io.c -- issue 10, the I/O layer: a model file truncated or changed while it
 * is loaded (TQ_E_IO naming the file, never SIGBUS), atomic saves onto FIFOs / character
 * devices / symlinks / directories / read-only files and stale temporaries of dead processes,
 * 64-bit config sizes refused out of range, and the messages of truncated or odd inputs.
 * Everything happens in a fresh temporary directory; no real /dev node is touched. Cases that
 * crashed before the fix run in a child process, so a crash is a failed check. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/core.h"
#include "t.h"
#include "turboquant.h"

static char dir[200]; /* the temporary directory */

static const char *tp(char *buf, const char *name)
{
    snprintf(buf, 300, "%s/%s", dir, name);
    return buf;
}

static int write_bytes(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(p, 1, n, f) == n;
    if (f && fclose(f) != 0)
        ok = 0;
    return ok;
}

static int write_text(const char *path, const char *s)
{
    return write_bytes(path, s, strlen(s));
}

/* Whole file into a malloc'd buffer (NUL-terminated); NULL if unreadable. */
static char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    char *b = NULL;
    size_t cap = 0, len = 0;
    if (!f)
        return NULL;
    for (;;) {
        if (len + 4096 + 1 > cap && !(b = realloc(b, cap = 2 * cap + 8192)))
            break;
        const size_t k = fread(b + len, 1, 4096, f);
        len += k;
        if (k == 0)
            break;
    }
    fclose(f);
    if (b)
        b[len] = 0;
    if (n)
        *n = len;
    return b;
}

static int copy_file(const char *src, const char *dst)
{
    size_t n;
    char *b = slurp(src, &n);
    const int ok = b && write_bytes(dst, b, n);
    free(b);
    return ok;
}

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

static int has(const char *hay, const char *needle)
{
    return hay && strstr(hay, needle) != NULL;
}

/* Run fn in a child: a signal (SIGBUS) or a failed check there is one failed check here. */
static void in_child(const char *what, int (*fn)(void))
{
    int status = 0;
    fflush(stdout);
    fflush(stderr);
    const pid_t p = fork();
    if (p == 0)
        _exit(fn());
    CHECK(p > 0 && waitpid(p, &status, 0) == p, "%s: fork/wait failed", what);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s: %s %d", what,
          WIFSIGNALED(status) ? "the child was killed by signal" : "the child failed, exit code",
          WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
}

/* ---- 1. files that change while they are read ---------------------------------------------- */
#define QN "model.layers.0.self_attn.q_proj.weight" /* F32 (8, 8) in tiny.gguf */
#define KN "model.layers.0.self_attn.k_proj.weight" /* F16 (4, 8), permuted rows */

static int child_gguf_truncated(void)
{
    char p[512];
    float q[64];
    uint16_t kb[32];
    tq_weights *w = NULL;
    const char *s = NULL;
    tp(p, "trunc.gguf");
    CHECK(copy_file("tests/data/io/tiny.gguf", p), "copy");
    CHECK(tq_weights_open(p, &w) == TQ_OK, "open: %s", tq_last_error());
    if (!w)
        return 1;
    CHECK(truncate(p, 0) == 0, "truncate: %s", strerror(errno));
    /* metadata was read into memory at open: still there, no fault */
    CHECK(tq_gguf_get_str(tq_weights_gguf(w), "general.architecture", &s, NULL) == TQ_OK &&
              !strcmp(s, "llama"),
          "metadata after truncation: %s", tq_last_error());
    tq_status st = tq_weights_read(w, QN, TQ_DTYPE_F32, q, sizeof(q));
    CHECK(st == TQ_E_IO && has(tq_last_error(), p) && has(tq_last_error(), "truncated"),
          "f32 read of a truncated file: %s (%s)", tq_status_str(st), tq_last_error());
    st = tq_weights_read(w, KN, TQ_DTYPE_BF16, kb, sizeof(kb));
    CHECK(st == TQ_E_IO && has(tq_last_error(), p), "f16 -> bf16 read: %s (%s)",
          tq_status_str(st), tq_last_error());
    st = tq_weights_read_rows(w, KN, 1, 2, TQ_DTYPE_F32, q, sizeof(q));
    CHECK(st == TQ_E_IO && has(tq_last_error(), p), "row read: %s (%s)", tq_status_str(st),
          tq_last_error());
    tq_weights_free(w);
    return t_fail != 0;
}

static int child_gguf_cut_in_data(void)
{
    /* cut inside the first tensor: the mapping would give zeros for the rest of the page */
    char p[512];
    float q[64];
    tq_weights *w = NULL;
    tp(p, "cut.gguf");
    CHECK(copy_file("tests/data/io/tiny.gguf", p), "copy");
    CHECK(tq_weights_open(p, &w) == TQ_OK, "open: %s", tq_last_error());
    if (!w)
        return 1;
    const size_t off = tq_gguf_data_offset(tq_weights_gguf(w));
    CHECK(truncate(p, (off_t)off + 100) == 0, "truncate: %s", strerror(errno));
    const tq_status st = tq_weights_read(w, QN, TQ_DTYPE_F32, q, sizeof(q));
    CHECK(st == TQ_E_IO && has(tq_last_error(), p),
          "a tensor cut after 100 of its 256 bytes: %s (%s)", tq_status_str(st),
          tq_last_error());
    tq_weights_free(w);
    return t_fail != 0;
}

static int child_gguf_grown(void)
{
    char p[512];
    float q[64];
    tq_weights *w = NULL;
    tp(p, "grown.gguf");
    CHECK(copy_file("tests/data/io/tiny.gguf", p), "copy");
    CHECK(tq_weights_open(p, &w) == TQ_OK, "open: %s", tq_last_error());
    if (!w)
        return 1;
    FILE *f = fopen(p, "ab");
    CHECK(f && fwrite("0123456789abcdef", 1, 16, f) == 16 && fclose(f) == 0, "append");
    const tq_status st = tq_weights_read(w, QN, TQ_DTYPE_F32, q, sizeof(q));
    CHECK(st == TQ_E_IO && has(tq_last_error(), p) && has(tq_last_error(), "changed"),
          "read after the file grew: %s (%s)", tq_status_str(st), tq_last_error());
    tq_weights_free(w);
    return t_fail != 0;
}

static int child_st_truncated(void)
{
    static const char *files[] = {"config.json", "model-00001-of-00002.safetensors",
                                  "model-00002-of-00002.safetensors",
                                  "model.safetensors.index.json"};
    char d[512], a[512], b[1100];
    float x[64];
    tq_weights *w = NULL;
    tp(d, "st");
    CHECK(mkdir(d, 0755) == 0, "mkdir %s", d);
    for (int i = 0; i < 4; i++) {
        snprintf(a, sizeof(a), "tests/data/io/tiny_st/%s", files[i]);
        snprintf(b, sizeof(b), "%s/%s", d, files[i]);
        CHECK(copy_file(a, b), "copy %s", a);
    }
    CHECK(tq_weights_open(d, &w) == TQ_OK, "open: %s", tq_last_error());
    if (!w)
        return 1;
    for (int i = 1; i <= 2; i++) {
        snprintf(b, sizeof(b), "%s/%s", d, files[i]);
        CHECK(truncate(b, 0) == 0, "truncate %s", b);
    }
    for (int64_t i = 0; i < tq_weights_count(w); i++) {
        tq_weights_tensor t;
        tq_weights_tensor_at(w, i, &t);
        const tq_status st = tq_weights_read(w, t.name, TQ_DTYPE_F32, x, sizeof(x));
        CHECK(st == TQ_E_IO && has(tq_last_error(), d) && has(tq_last_error(), ".safetensors"),
              "%s of a truncated shard: %s (%s)", t.name, tq_status_str(st), tq_last_error());
    }
    tq_weights_free(w);
    return t_fail != 0;
}

/* A GGUF whose header (one 5 MiB string) is longer than the first header read. */
static void check_big_header(void)
{
    const size_t big = (size_t)5 << 20;
    const char *k1 = "general.architecture", *v1 = "other", *k2 = "big", *tn = "t";
    size_t n = 0, cap = big + 4096;
    uint8_t *b = calloc(1, cap);
    char p[512];
    tq_weights *w = NULL;
#define PUT(src, len) (memcpy(b + n, (src), (len)), n += (len))
#define U32(v) (tq_wr32(b + n, (uint32_t)(v)), n += 4)
#define U64(v) (tq_wr64(b + n, (uint64_t)(v)), n += 8)
    PUT("GGUF", 4);
    U32(3);
    U64(1); /* tensors */
    U64(2); /* kv */
    U64(strlen(k1)), PUT(k1, strlen(k1)), U32(8), U64(strlen(v1)), PUT(v1, strlen(v1));
    U64(strlen(k2)), PUT(k2, strlen(k2)), U32(8), U64(big);
    memset(b + n, 'x', big), n += big;
    U64(strlen(tn)), PUT(tn, strlen(tn)), U32(1), U64(4), U32(0), U64(0); /* F32 [4] at 0 */
    n = (n + 31) / 32 * 32;
    for (int i = 0; i < 4; i++) {
        const float v = 1.5f * (float)(i + 1);
        memcpy(b + n, &v, 4), n += 4;
    }
#undef PUT
#undef U32
#undef U64
    tp(p, "big_header.gguf");
    CHECK(write_bytes(p, b, n), "write %s", p);
    {
        /* the same file with the big string claiming 2^40 bytes: refused naming the real size
         * (not the size of the part read so far) */
        char q[512], sz[64];
        tq_gguf *g = NULL;
        const size_t at = 4 + 4 + 8 + 8 + 8 + strlen(k1) + 4 + 8 + strlen(v1) + 8 + strlen(k2) + 4;
        tq_wr64(b + at, (uint64_t)1 << 40);
        tp(q, "bad_big_header.gguf");
        CHECK(write_bytes(q, b, n), "write %s", q);
        snprintf(sz, sizeof(sz), "(%zu bytes)", n);
        const tq_status st = tq_gguf_open(q, &g);
        CHECK(st == TQ_E_FORMAT && has(tq_last_error(), "string length 1099511627776") &&
                  has(tq_last_error(), sz),
              "2^40-byte string: %s (%s)", tq_status_str(st), tq_last_error());
        tq_gguf_free(g);
    }
    free(b);
    CHECK(tq_weights_open(p, &w) == TQ_OK, "5 MiB header: %s", tq_last_error());
    if (w) {
        const char *s = NULL;
        size_t len = 0;
        float x[4] = {0};
        CHECK(tq_gguf_get_str(tq_weights_gguf(w), "big", &s, &len) == TQ_OK && len == big &&
                  s[0] == 'x' && s[big - 1] == 'x',
              "big string: %zu bytes", len);
        CHECK(tq_weights_read(w, "t", TQ_DTYPE_F32, x, sizeof(x)) == TQ_OK && x[0] == 1.5f &&
                  x[3] == 6.0f,
              "tensor after a 5 MiB header: %g %g (%s)", x[0], x[3], tq_last_error());
        tq_weights_free(w);
    }
}

/* ---- 2. atomic saves -------------------------------------------------------------------------- */
static tq_status st_save(const char *path)
{
    const float v[2] = {1.0f, 2.0f};
    const int64_t shape[1] = {2};
    tq_st_writer *w = NULL;
    tq_status st = tq_st_writer_create(path, 0, &w);
    if (!st)
        st = tq_st_writer_add(w, "x", TQ_ST_F32, 1, shape, v, sizeof(v));
    if (!st)
        st = tq_st_writer_finish(w);
    tq_st_writer_free(w);
    return st;
}

/* 1 if path is a safetensors file holding x = [1, 2] */
static int st_ok(const char *path)
{
    tq_st *s = NULL;
    tq_st_tensor_info ti;
    float v[2];
    int ok = tq_st_open(path, &s) == TQ_OK && tq_st_find(s, "x") == 0 &&
             tq_st_tensor(s, 0, &ti) == TQ_OK && ti.nbytes == 8;
    if (ok) {
        memcpy(v, ti.data, 8);
        ok = v[0] == 1.0f && v[1] == 2.0f;
    }
    tq_st_free(s);
    return ok;
}

/* Number of entries of dir whose name starts with prefix. */
static int count_prefix(const char *prefix)
{
    char cmd[700];
    snprintf(cmd, sizeof(cmd), "ls -a '%s' | grep -c '^%s' 2>/dev/null", dir, prefix);
    FILE *f = popen(cmd, "r");
    int n = -1;
    if (f) {
        if (fscanf(f, "%d", &n) != 1)
            n = -1;
        pclose(f);
    }
    return n;
}

typedef struct fifo_reader {
    const char *path;
    volatile int ready;
    char buf[4096];
    size_t n;
} fifo_reader;

/* Open the FIFO without blocking, then read what a writer sends (5 s without data = give up). */
static void *fifo_read(void *arg)
{
    fifo_reader *r = arg;
    const int fd = open(r->path, O_RDONLY | O_NONBLOCK);
    r->ready = fd >= 0 ? 1 : -1;
    if (fd < 0)
        return NULL;
    for (;;) {
        struct pollfd pf = {fd, POLLIN, 0};
        if (poll(&pf, 1, 5000) <= 0)
            break; /* nothing came */
        const ssize_t k = read(fd, r->buf + r->n, sizeof(r->buf) - 1 - r->n);
        if (k < 0 && (errno == EAGAIN || errno == EINTR))
            continue;
        if (k <= 0)
            break; /* the writer closed */
        r->n += (size_t)k;
    }
    close(fd);
    return NULL;
}

static void check_fifo(void)
{
    char p[512];
    struct stat sb;
    pthread_t th;
    fifo_reader r = {0};
    tp(p, "fifo.safetensors");
    CHECK(mkfifo(p, 0644) == 0, "mkfifo: %s", strerror(errno));
    r.path = p;
    CHECK(pthread_create(&th, NULL, fifo_read, &r) == 0, "thread");
    while (!r.ready)
        usleep(1000);
    const tq_status st = st_save(p);
    pthread_join(th, NULL);
    CHECK(st == TQ_OK, "save to a FIFO: %s", tq_last_error());
    CHECK(lstat(p, &sb) == 0 && S_ISFIFO(sb.st_mode), "the FIFO was replaced (mode %o)",
          (unsigned)sb.st_mode);
    CHECK(r.n > 9 && r.buf[8] == '{' && memmem(r.buf, r.n, "\"x\"", 3),
          "the reader got %zu bytes of a safetensors file", r.n);
    CHECK(count_prefix("fifo.safetensors.tmp") == 0, "a temporary file was left");
}

static void check_chardev(void)
{
    /* our own node for the null device (1, 3) in the temporary directory; skipped where
     * mknod is not allowed or the file system is mounted nodev */
    char p[512];
    struct stat sb;
    tp(p, "null.safetensors");
    if (mknod(p, S_IFCHR | 0666, makedev(1, 3)) != 0) {
        printf("note: character device case skipped (mknod: %s); the FIFO covers the branch\n",
               strerror(errno));
        return;
    }
    const int fd = open(p, O_WRONLY);
    if (fd < 0) {
        printf("note: character device case skipped (open: %s)\n", strerror(errno));
        unlink(p);
        return;
    }
    close(fd);
    CHECK(st_save(p) == TQ_OK, "save to a character device: %s", tq_last_error());
    CHECK(lstat(p, &sb) == 0 && S_ISCHR(sb.st_mode), "the device node was replaced (mode %o)",
          (unsigned)sb.st_mode);
    unlink(p);
}

static void check_symlinks(void)
{
    char real[512], link[512], dang[512], made[512];
    struct stat sb;
    tp(real, "real.safetensors");
    tp(link, "link.safetensors");
    CHECK(write_text(real, "old") && symlink("real.safetensors", link) == 0, "setup");
    CHECK(st_save(link) == TQ_OK, "save through a symlink: %s", tq_last_error());
    CHECK(lstat(link, &sb) == 0 && S_ISLNK(sb.st_mode), "the symlink was replaced by a file");
    CHECK(st_ok(real), "the link's target holds the new file");
    /* a dangling link: its target is created */
    tp(dang, "dangling.safetensors");
    tp(made, "made.safetensors");
    CHECK(symlink("made.safetensors", dang) == 0, "symlink");
    CHECK(st_save(dang) == TQ_OK, "save through a dangling symlink: %s", tq_last_error());
    CHECK(lstat(dang, &sb) == 0 && S_ISLNK(sb.st_mode), "the dangling symlink was replaced");
    CHECK(st_ok(made), "the dangling link's target was created");
}

static void check_refused(void)
{
    char ro[512], d[512];
    struct stat sb;
    tp(ro, "ro.safetensors");
    CHECK(write_text(ro, "old!") && chmod(ro, 0444) == 0, "setup");
    tq_status st = st_save(ro);
    CHECK(st == TQ_E_IO && has(tq_last_error(), ro) && has(tq_last_error(), "read-only"),
          "save over a read-only file: %s (%s)", tq_status_str(st), tq_last_error());
    char *b = slurp(ro, NULL);
    CHECK(b && !strcmp(b, "old!"), "the read-only file was changed: '%s'", b ? b : "(gone)");
    free(b);
    CHECK(lstat(ro, &sb) == 0 && (sb.st_mode & 0777) == 0444, "its mode changed");
    CHECK(count_prefix("ro.safetensors.tmp") == 0, "a temporary file was left");
    tp(d, "dir.safetensors");
    CHECK(mkdir(d, 0755) == 0, "mkdir");
    st = st_save(d);
    CHECK(st == TQ_E_IO && has(tq_last_error(), d) && has(tq_last_error(), "is a directory"),
          "save onto a directory: %s (%s)", tq_status_str(st), tq_last_error());
    {
        tq_atomic_file *f = NULL;
        st = tq_atomic_file_open(d, &f);
        CHECK(st == TQ_E_IO && !f && has(tq_last_error(), "is a directory"),
              "tq_atomic_file_open(directory): %s (%s)", tq_status_str(st), tq_last_error());
    }
}

static void check_mode_kept(void)
{
    char p[512];
    struct stat sb;
    tp(p, "private.safetensors");
    CHECK(write_text(p, "old") && chmod(p, 0600) == 0, "setup");
    CHECK(st_save(p) == TQ_OK && st_ok(p), "replace: %s", tq_last_error());
    CHECK(stat(p, &sb) == 0 && (sb.st_mode & 0777) == 0600, "mode %o after replacing a 0600 file",
          (unsigned)(sb.st_mode & 0777));
}

static void check_stale(void)
{
    char p[512], dead1[600], dead2[600], live[600];
    int status;
    const pid_t kid = fork();
    if (kid == 0)
        _exit(0);
    CHECK(kid > 0 && waitpid(kid, &status, 0) == kid, "fork");
    CHECK(kill(kid, 0) != 0 && errno == ESRCH, "pid %ld is still alive?", (long)kid);
    tp(p, "s.safetensors");
    snprintf(dead1, sizeof(dead1), "%s.tmp.%ld", p, (long)kid);
    snprintf(dead2, sizeof(dead2), "%s.tmp.%ld.3", p, (long)kid);
    snprintf(live, sizeof(live), "%s.tmp.%ld", p, (long)getppid()); /* alive: our parent */
    CHECK(write_text(dead1, "left by kill -9") && write_text(dead2, "x") && write_text(live, "y"),
          "setup");
    CHECK(st_save(p) == TQ_OK && st_ok(p), "save: %s", tq_last_error());
    CHECK(access(dead1, F_OK) != 0, "the stale temporary of dead pid %ld was kept", (long)kid);
    CHECK(access(dead2, F_OK) != 0, "the stale temporary %s was kept", dead2);
    CHECK(access(live, F_OK) == 0, "the temporary of a live process was removed");
    unlink(live);
}

static void check_helper(void)
{
    char p[512], want[600];
    tq_atomic_file *f = NULL;
    tp(p, "h.txt");
    CHECK(tq_atomic_file_open(p, &f) == TQ_OK, "open: %s", tq_last_error());
    snprintf(want, sizeof(want), "%s.tmp.%ld", p, (long)getpid());
    CHECK(f && tq_atomic_file_tmp_path(f) && !strcmp(tq_atomic_file_tmp_path(f), want),
          "temporary name %s, want %s", f ? tq_atomic_file_tmp_path(f) : "-", want);
    fprintf(tq_atomic_file_stream(f), "draft");
    tq_atomic_file_abort(f);
    CHECK(access(p, F_OK) != 0 && access(want, F_OK) != 0, "abort left files");
    CHECK(tq_atomic_file_open(p, &f) == TQ_OK, "open: %s", tq_last_error());
    fprintf(tq_atomic_file_stream(f), "hello %d\n", 42);
    CHECK(tq_atomic_file_commit(f) == TQ_OK, "commit: %s", tq_last_error());
    char *b = slurp(p, NULL);
    CHECK(b && !strcmp(b, "hello 42\n"), "content '%s'", b ? b : "(none)");
    free(b);
    CHECK(count_prefix("h.txt.tmp") == 0, "a temporary file was left");
}

/* ---- 3. config sizes --------------------------------------------------------------------------- */
static void check_config_sizes(void)
{
    static const struct {
        const char *vocab;
        const char *key;
        const char *value;
    } cases[] = {
        {"\"vocab_size\": 1e12", "vocab_size", "1000000000000"},
        {"\"vocab_size\": 1000000000000", "vocab_size", "1000000000000"},
        {"\"vocab_size\": -5", "vocab_size", "-5"},
        {"\"vocab_size\": 32000, \"hidden_size\": 4294967360", "hidden_size", "4294967360"},
        {"\"vocab_size\": 32000.5", "vocab_size", "32000.5"},
    };
    char p[512];
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char text[512];
        tq_model_config c;
        snprintf(text, sizeof(text),
                 "{\"model_type\": \"llama\", \"num_hidden_layers\": 2, \"hidden_size\": 64, "
                 "\"num_attention_heads\": 4, \"intermediate_size\": 128, %s}\n",
                 cases[i].vocab);
        tp(p, "config.json");
        CHECK(write_text(p, text), "write");
        memset(&c, 0, sizeof(c));
        const tq_status st = tq_model_config_from_json(p, &c);
        CHECK(st == TQ_E_FORMAT && has(tq_last_error(), cases[i].key) &&
                  has(tq_last_error(), cases[i].value) && has(tq_last_error(), p),
              "%s: %s (%s), vocab %d", cases[i].vocab, tq_status_str(st), tq_last_error(),
              c.vocab);
        if (i < 3)
            CHECK(has(tq_last_error(), "16777216"), "the limit is named: %s", tq_last_error());
    }
    /* in range: accepted, 64-bit all the way */
    {
        tq_model_config c;
        CHECK(write_text(p, "{\"model_type\": \"llama\", \"num_hidden_layers\": 2, "
                            "\"hidden_size\": 64, \"num_attention_heads\": 4, "
                            "\"intermediate_size\": 128, \"vocab_size\": 262144}"),
              "write");
        CHECK(tq_model_config_from_json(p, &c) == TQ_OK && c.vocab == 262144, "262144: %s",
              tq_last_error());
    }
}

/* ---- 4. messages --------------------------------------------------------------------------- */
static void check_messages(void)
{
    char p[512];
    tq_status st;
    {
        /* safetensors header cut inside the JSON */
        const char *j = "{\"x\":{\"dtype\":\"F32\",\"shape\":[2]";
        uint8_t b[128];
        tq_st *s = NULL;
        tq_wr64(b, strlen(j));
        memcpy(b + 8, j, strlen(j));
        tp(p, "cut_header.safetensors");
        CHECK(write_bytes(p, b, 8 + strlen(j)), "write");
        st = tq_st_open(p, &s);
        char at[32];
        snprintf(at, sizeof(at), "byte %zu", 8 + strlen(j));
        CHECK(st == TQ_E_FORMAT && has(tq_last_error(), "truncated") && has(tq_last_error(), p) &&
                  has(tq_last_error(), at) && !has(tq_last_error(), "continue"),
              "cut safetensors header: %s", tq_last_error());
        tq_st_free(s);
    }
    {
        tq_model_config c;
        tp(p, "config.json");
        CHECK(write_text(p, ""), "write");
        st = tq_model_config_from_json(p, &c);
        CHECK(st == TQ_E_FORMAT && has(tq_last_error(), "empty") && has(tq_last_error(), p) &&
                  !has(tq_last_error(), "continue"),
              "empty config.json: %s", tq_last_error());
        const char *cut = "{\"model_type\": \"llama\", \"hidden_size\": 6";
        char at[32];
        snprintf(at, sizeof(at), "byte %zu", strlen(cut));
        CHECK(write_text(p, cut), "write");
        st = tq_model_config_from_json(p, &c);
        CHECK(st == TQ_E_FORMAT && has(tq_last_error(), "truncated") && has(tq_last_error(), p) &&
                  has(tq_last_error(), at) && !has(tq_last_error(), "continue"),
              "truncated config.json: %s", tq_last_error());
    }
    {
        tq_tokenizer *t = NULL;
        tp(p, "tokenizer.json");
        CHECK(write_text(p, "null"), "write");
        st = tq_tokenizer_from_json(p, &t);
        CHECK(st == TQ_E_FORMAT && has(tq_last_error(), "valid JSON") &&
                  has(tq_last_error(), "not a tokenizer object") && has(tq_last_error(), p) &&
                  !has(tq_last_error(), "end of input"),
              "tokenizer.json = null: %s", tq_last_error());
        tq_tokenizer_free(t);
        st = tq_tokenizer_from_json_memory("null", 4, "mem.json", &t);
        CHECK(st == TQ_E_FORMAT && has(tq_last_error(), "not a tokenizer object"),
              "memory null: %s", tq_last_error());
    }
    {
        /* formats by magic, not by name */
        char q[512];
        tq_weights *w = NULL;
        tq_tokenizer *t = NULL;
        int64_t n_gguf = -1;
        CHECK(tq_weights_open("tests/data/io/tiny.gguf", &w) == TQ_OK, "%s", tq_last_error());
        if (w)
            n_gguf = tq_weights_count(w);
        tq_weights_free(w);
        w = NULL;
        tp(p, "model.bin");
        CHECK(copy_file("tests/data/io/tiny.gguf", p), "copy");
        st = tq_weights_open(p, &w);
        CHECK(st == TQ_OK && w && tq_weights_source_format(w) == TQ_WEIGHTS_GGUF &&
                  tq_weights_count(w) == n_gguf,
              "GGUF named .bin: %s (%s)", tq_status_str(st), tq_last_error());
        tq_weights_free(w);
        w = NULL;
        st = tq_tokenizer_load(p, &t);
        CHECK(st != TQ_OK && has(tq_last_error(), "tokenizer.ggml"),
              "tokenizer of a GGUF named .bin is looked up in the GGUF: %s", tq_last_error());
        tq_tokenizer_free(t);
        tp(q, "noext");
        CHECK(mkdir(q, 0755) == 0, "mkdir");
        tp(q, "noext/weights.data");
        CHECK(copy_file("tests/data/io/tiny_st/model-00001-of-00002.safetensors", q), "copy");
        st = tq_weights_open(q, &w);
        CHECK(st == TQ_OK && w && tq_weights_source_format(w) == TQ_WEIGHTS_SAFETENSORS &&
                  tq_weights_count(w) == 1,
              "safetensors named .data: %s (%s)", tq_status_str(st), tq_last_error());
        tq_weights_free(w);
        w = NULL;
        tp(q, "junk.bin");
        CHECK(write_text(q, "hello, this is not a model"), "write");
        st = tq_weights_open(q, &w);
        CHECK(st == TQ_E_ARG && has(tq_last_error(), "unknown model format") &&
                  has(tq_last_error(), q),
              "junk: %s (%s)", tq_status_str(st), tq_last_error());
    }
}

int main(int argc, char **argv)
{
    t_init(argc, argv, "test_reliability_io");
    snprintf(dir, sizeof(dir), "%s/tq_relio_XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(dir))
        return t_skip("cannot create a temporary directory");
    printf("temporary directory %s\n", dir);
    signal(SIGPIPE, SIG_IGN);

    in_child("GGUF truncated to 0 bytes after open", child_gguf_truncated);
    in_child("GGUF truncated inside a tensor", child_gguf_cut_in_data);
    in_child("GGUF grown after open", child_gguf_grown);
    in_child("safetensors shards truncated after open", child_st_truncated);
    check_big_header();

    check_fifo();
    check_chardev();
    check_symlinks();
    check_refused();
    check_mode_kept();
    check_stale();
    check_helper();

    check_config_sizes();
    check_messages();

    if (!getenv("TQ_KEEP_TMP"))
        nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    return t_done();
}
