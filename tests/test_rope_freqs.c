/* test_rope_freqs.c -- issue 10 item 1 for Llama-3-style GGUFs: rope_freqs.weight is read with
 * pread like every other tensor, so a file truncated while tq_model_load() runs gives TQ_E_IO
 * naming the file, never SIGBUS. The truncation happens at the exact moment the loader looks the
 * tensor up: this executable is linked with -Wl,--wrap=tq_gguf_find_tensor (tests/rope_freqs.cmake)
 * and truncates the file on the second lookup of rope_freqs.weight (the first is the config's, in
 * tq_weights_open). Fixture: tests/data/io/rope_freqs.gguf, made by
 * scripts/io_ref/make_rope_freqs_fixture.py.
 * The load runs in a child process, so a SIGBUS is a failed check. */
#include <errno.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "t.h"
#include "turboquant.h"

#define FIXTURE "tests/data/io/rope_freqs.gguf"

static char path[256];  /* the copy that gets truncated */
static int arm;         /* 1: truncate path on the 2nd rope_freqs.weight lookup */
static int n_lookups;   /* rope_freqs.weight lookups so far */

int64_t __real_tq_gguf_find_tensor(const tq_gguf *g, const char *name);
int64_t __wrap_tq_gguf_find_tensor(const tq_gguf *g, const char *name)
{
    if (name && !strcmp(name, "rope_freqs.weight") && ++n_lookups == 2 && arm &&
        truncate(path, 0) != 0)
        fprintf(stderr, "truncate %s: %s\n", path, strerror(errno));
    return __real_tq_gguf_find_tensor(g, name);
}

static int copy(const char *src, const char *dst)
{
    char buf[8192];
    size_t n;
    int ok = 1;
    FILE *in = fopen(src, "rb"), *out = fopen(dst, "wb");
    if (!in || !out)
        ok = 0;
    while (ok && (n = fread(buf, 1, sizeof(buf), in)) > 0)
        ok = fwrite(buf, 1, n, out) == n;
    if (in)
        fclose(in);
    if (out && fclose(out))
        ok = 0;
    return ok;
}

static int child(void)
{
    tq_model_opts mo;
    tq_model *m = NULL;
    tq_model_opts_default(&mo);
    mo.weight_type = TQ_DTYPE_F32;
    mo.n_threads = 1;
    const tq_status st = tq_model_load(path, &mo, &m);
    const int lookups = n_lookups;
    tq_model_free(m);
    if (!arm) {
        CHECK(st == TQ_OK && lookups == 2, "untouched fixture: %s (%s), %d lookups of "
              "rope_freqs.weight (the test relies on 2)", tq_status_str(st), tq_last_error(),
              lookups);
    } else {
        CHECK(st == TQ_E_IO && strstr(tq_last_error(), path),
              "truncated during the load: %s (%s)", tq_status_str(st), tq_last_error());
    }
    return t_fail != 0;
}

static void run(int armed, const char *what)
{
    CHECK(copy(FIXTURE, path), "copy %s to %s", FIXTURE, path);
    arm = armed;
    n_lookups = 0;
    fflush(stdout);
    fflush(stderr);
    const pid_t pid = fork();
    if (pid == 0)
        _exit(child());
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s: %s %d", what,
          WIFSIGNALED(status) ? "the child was killed by signal" : "the child failed, exit code",
          WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
}

int main(int argc, char **argv)
{
    t_init(argc, argv, "test_rope_freqs");
    if (access(FIXTURE, R_OK) != 0)
        return t_skip(FIXTURE " not found (run from the source root)");
    snprintf(path, sizeof(path), "/tmp/tq_test_rope_freqs_%ld.gguf", (long)getpid());
    run(0, "load of the fixture");
    run(1, "load of a file truncated at the rope_freqs.weight lookup");
    unlink(path);
    return t_done();
}
