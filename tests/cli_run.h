/* cli_run.h -- run the built `tq` binary as a subprocess (tests/test_cli*.c): its exit code,
 * stdout and stderr captured, stdin fed from a string, stdout optionally sent to /dev/full or
 * closed. The binary's path is the test's first argument ($<TARGET_FILE:tq>, tests/cli.cmake). */
#ifndef TQ_CLI_RUN_H
#define TQ_CLI_RUN_H

#include <fcntl.h>
#include <stdarg.h>
#include <sys/wait.h>
#include <unistd.h>

#include "t.h"

enum { OUT_CAPTURE = 0, OUT_DEVFULL = 1, OUT_CLOSED = 2 };

typedef struct cli_res {
    int rc;            /* exit code; 128 + signal if killed */
    char out[65536];   /* stdout (OUT_CAPTURE only), NUL-terminated, truncated */
    char err[65536];   /* stderr */
} cli_res;

static const char *cli_tq; /* path of the tq binary */

static void slurp(FILE *f, char *buf, size_t cap)
{
    rewind(f);
    size_t n = fread(buf, 1, cap - 1, f);
    buf[n] = 0;
}

/* cli_run() -- run tq with the NULL-terminated argument list (argv[0] excluded). */
static int cli_run(cli_res *r, int out_mode, const char *stdin_text, ...)
{
    const char *argv[64];
    int n = 0;
    va_list ap;
    argv[n++] = cli_tq;
    va_start(ap, stdin_text);
    for (const char *a; (a = va_arg(ap, const char *)) && n < 63;)
        argv[n++] = a;
    va_end(ap);
    argv[n] = NULL;

    FILE *fo = tmpfile(), *fe = tmpfile(), *fi = tmpfile();
    if (!fo || !fe || !fi) {
        perror("tmpfile");
        exit(1);
    }
    if (stdin_text) {
        fputs(stdin_text, fi);
        fflush(fi);
        rewind(fi);
    }
    fflush(stdout);
    fflush(stderr);
    const pid_t pid = fork();
    if (pid == 0) {
        dup2(fileno(fi), 0);
        if (out_mode == OUT_CAPTURE) {
            dup2(fileno(fo), 1);
        } else if (out_mode == OUT_DEVFULL) {
            const int fd = open("/dev/full", O_WRONLY); /* opened as a target, never changed */
            if (fd < 0)
                _exit(126);
            dup2(fd, 1);
            close(fd);
        } else {
            close(1);
        }
        dup2(fileno(fe), 2);
        execv(cli_tq, (char *const *)argv);
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    r->rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    slurp(fo, r->out, sizeof(r->out));
    slurp(fe, r->err, sizeof(r->err));
    fclose(fo);
    fclose(fe);
    fclose(fi);
    return r->rc;
}

/* CHECK_RUN -- exit code rc and a substring of stderr; prints both streams on failure. */
#define CHECK_RUN(r, want_rc, want_err, what)                                                  \
    do {                                                                                      \
        CHECK((r)->rc == (want_rc) && strstr((r)->err, (want_err)),                           \
              "%s: exit %d (want %d), stderr wants \"%s\":\n%s", (what), (r)->rc, (want_rc),  \
              (want_err), (r)->err);                                                          \
    } while (0)

/* cli_init() -- the binary from argv[1]; 0, or a skip/fail code to return. */
static int cli_init(int argc, char **argv)
{
    if (argc < 2 || access(argv[1], X_OK) != 0) {
        fprintf(stderr, "usage: %s PATH-TO-tq (tests/cli.cmake passes it)\n", argv[0]);
        return 1;
    }
    cli_tq = argv[1];
    return 0;
}

#endif
