/* atomic_file.c -- the one way every writer in the tree replaces a file (tq_atomic_file_*,
 * turboquant/io.h; docs/FORMAT.md "Atomic saves").
 *
 * A regular file (or a missing one) is written as "<F>.tmp.<pid>" in the same directory, fsynced
 * and renamed over F, then the directory is fsynced: readers see the old file or the new one,
 * never a half-written one. Anything else is not renamed over:
 *   FIFO, character device  written in place (no temporary, no rename; /dev/null, a pipe to a
 *                           reader); fsync errors that only say "not supported here" are ignored
 *   symlink                 resolved (chains too, dangling ones included) and the final target is
 *                           replaced atomically; the link itself stays
 *   directory, socket, block device   refused, naming the path
 *   a regular file we may not write   refused: access(W_OK) fails, or no write bit is set at all
 *                           (root passes access() whatever the mode, so the bits are checked too)
 * Before the temporary is created, "<F>.tmp.<pid2>" files left in that directory by processes
 * that no longer exist (kill(pid2, 0) fails with ESRCH: a kill -9 during a save) are removed. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/io_internal.h"

#define MAX_LINKS 40 /* SYMLOOP_MAX on Linux */

struct tq_atomic_file {
    char *path;   /* the file as named by the caller (messages)                 */
    char *target; /* the file replaced: path with symlinks resolved             */
    char *tmp;    /* temporary name, NULL when writing in place                 */
    int fd;
    FILE *fp; /* tq_atomic_file_stream() view of fd, owns it once created */
};

/* Directory part of p ("." if none) in a new allocation. */
static char *dir_of(const char *p)
{
    const char *slash = strrchr(p, '/');
    char *d;
    if (!slash)
        return tq_strdup(".");
    if (slash == p)
        return tq_strdup("/");
    if (!(d = tq_malloc((size_t)(slash - p) + 1)))
        return NULL;
    memcpy(d, p, (size_t)(slash - p));
    d[slash - p] = 0;
    return d;
}

/* Follow symlinks from path to the first name that is not one (it may not exist). */
static tq_status resolve(const char *path, char **out)
{
    char *cur = tq_strdup(path);
    *out = NULL;
    if (!cur)
        return TQ_FAIL(TQ_E_NOMEM, "%s: out of memory", path);
    for (int hops = 0;; hops++) {
        struct stat sb;
        char buf[PATH_MAX];
        ssize_t n;
        if (lstat(cur, &sb) != 0 || !S_ISLNK(sb.st_mode)) {
            *out = cur;
            return TQ_OK;
        }
        if (hops == MAX_LINKS) {
            tq_free(cur);
            return TQ_FAIL(TQ_E_IO, "%s: more than %d levels of symbolic links", path, MAX_LINKS);
        }
        if ((n = readlink(cur, buf, sizeof(buf) - 1)) < 0) {
            const int e = errno;
            tq_free(cur);
            return TQ_FAIL(TQ_E_IO, "%s: cannot read the symbolic link: %s", path, strerror(e));
        }
        buf[n] = 0;
        char *next;
        if (buf[0] == '/') {
            next = tq_strdup(buf);
        } else { /* relative to the directory holding the link */
            char *d = dir_of(cur);
            next = d ? tq_path_join(d, buf) : NULL;
            tq_free(d);
        }
        tq_free(cur);
        if (!(cur = next))
            return TQ_FAIL(TQ_E_NOMEM, "%s: out of memory", path);
    }
}

/* Remove "<base>.tmp.<pid>[.<k>]" files in dir whose pid is not a live process. */
static void remove_stale(const char *dir, const char *base)
{
    const size_t bl = strlen(base);
    DIR *d = opendir(dir);
    struct dirent *e;
    if (!d)
        return;
    while ((e = readdir(d))) {
        const char *s = e->d_name;
        char *end;
        long pid;
        if (strncmp(s, base, bl) || strncmp(s + bl, ".tmp.", 5))
            continue;
        s += bl + 5;
        if (*s < '0' || *s > '9')
            continue;
        errno = 0;
        pid = strtol(s, &end, 10);
        if (errno || pid <= 0 || pid > INT_MAX || (*end && *end != '.'))
            continue;
        if (*end == '.') { /* ".<k>": the suffix of a second save by the same process */
            const char *k = end + 1;
            if (!*k || strspn(k, "0123456789") != strlen(k))
                continue;
        }
        if (pid == (long)getpid() || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue;
        char *p = tq_path_join(dir, e->d_name);
        struct stat sb;
        if (p && lstat(p, &sb) == 0 && S_ISREG(sb.st_mode)) {
            if (unlink(p) == 0)
                tq_log(TQ_LOG_INFO, "%s: removed the temporary file of dead process %ld", p, pid);
        }
        tq_free(p);
    }
    closedir(d);
}

/* Create the temporary "<target>.tmp.<pid>" (or ".tmp.<pid>.<k>" when another save of this
 * process holds that name). */
static tq_status create_tmp(tq_atomic_file *f, mode_t mode)
{
    const size_t n = strlen(f->target) + 48;
    if (!(f->tmp = tq_malloc(n)))
        return TQ_FAIL(TQ_E_NOMEM, "%s: out of memory", f->path);
    for (int k = 0; k < 1000; k++) {
        if (k == 0)
            snprintf(f->tmp, n, "%s.tmp.%ld", f->target, (long)getpid());
        else
            snprintf(f->tmp, n, "%s.tmp.%ld.%d", f->target, (long)getpid(), k);
        f->fd = open(f->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
        if (f->fd >= 0)
            return TQ_OK;
        if (errno != EEXIST)
            break;
    }
    const int e = errno;
    tq_free(f->tmp);
    f->tmp = NULL;
    return TQ_FAIL(TQ_E_IO, "%s: cannot create a temporary file next to it: %s", f->path,
                   strerror(e));
}

tq_status tq_atomic_file_open(const char *path, tq_atomic_file **out)
{
    tq_atomic_file *f;
    struct stat sb;
    tq_status st;
    mode_t mode = 0666; /* new files: what fopen() gives, minus the umask */

    if (!out || !path || !*path)
        return TQ_FAIL(TQ_E_ARG, "tq_atomic_file_open: NULL or empty path");
    *out = NULL;
    if (!(f = tq_calloc(1, sizeof(*f))))
        return TQ_FAIL(TQ_E_NOMEM, "%s: out of memory", path);
    f->fd = -1;
    if (!(f->path = tq_strdup(path))) {
        st = TQ_FAIL(TQ_E_NOMEM, "%s: out of memory", path);
        goto fail;
    }
    if ((st = resolve(path, &f->target)))
        goto fail;
    if (stat(f->target, &sb) == 0) {
        const char *via = strcmp(path, f->target) ? " (the target of the symbolic link)" : "";
        if (S_ISDIR(sb.st_mode)) {
            st = TQ_FAIL(TQ_E_IO, "%s%s is a directory: name a file to write", f->target, via);
            goto fail;
        }
        if (S_ISFIFO(sb.st_mode) || S_ISCHR(sb.st_mode)) { /* write in place */
            if ((f->fd = open(f->target, O_WRONLY | O_CLOEXEC)) < 0) {
                st = TQ_FAIL(TQ_E_IO, "%s%s: cannot open for writing: %s", f->target, via,
                             strerror(errno));
                goto fail;
            }
            *out = f;
            return TQ_OK;
        }
        if (!S_ISREG(sb.st_mode)) {
            st = TQ_FAIL(TQ_E_IO,
                         "%s%s is not a regular file, FIFO or character device: refusing to "
                         "replace it",
                         f->target, via);
            goto fail;
        }
        if (faccessat(AT_FDCWD, f->target, W_OK, AT_EACCESS) != 0 ||
            !(sb.st_mode & (S_IWUSR | S_IWGRP | S_IWOTH))) {
            st = TQ_FAIL(TQ_E_IO,
                         "%s%s is read-only (mode %04o): refusing to replace it; make it "
                         "writable (chmod u+w) or write elsewhere",
                         f->target, via, (unsigned)(sb.st_mode & 07777));
            goto fail;
        }
        mode = sb.st_mode & 07777; /* the replacement keeps the old file's permissions */
    } else if (errno != ENOENT) {
        st = TQ_FAIL(TQ_E_IO, "%s: cannot stat: %s", f->target, strerror(errno));
        goto fail;
    }
    {
        char *dir = dir_of(f->target);
        const char *slash = strrchr(f->target, '/');
        if (!dir) {
            st = TQ_FAIL(TQ_E_NOMEM, "%s: out of memory", path);
            goto fail;
        }
        remove_stale(dir, slash ? slash + 1 : f->target);
        tq_free(dir);
    }
    if ((st = create_tmp(f, mode)))
        goto fail;
    if (mode != 0666)
        (void)fchmod(f->fd, mode); /* open() applied the umask; keep the old mode exactly */
    *out = f;
    return TQ_OK;
fail:
    tq_atomic_file_abort(f);
    return st;
}

int tq_atomic_file_fd(const tq_atomic_file *f)
{
    return f ? (f->fp ? fileno(f->fp) : f->fd) : -1;
}

FILE *tq_atomic_file_stream(tq_atomic_file *f)
{
    if (!f)
        return NULL;
    if (!f->fp && f->fd >= 0 && (f->fp = fdopen(f->fd, "wb")))
        f->fd = -1; /* the stream owns it now */
    return f->fp;
}

const char *tq_atomic_file_tmp_path(const tq_atomic_file *f)
{
    return f ? f->tmp : NULL;
}

/* fsync errors that only mean "this kind of file cannot be synced". */
static int sync_unsupported(int e)
{
    return e == EINVAL || e == EROFS || e == ENOTSUP || e == EOPNOTSUPP || e == ENOTTY;
}

tq_status tq_atomic_file_commit(tq_atomic_file *f)
{
    tq_status st = TQ_OK;
    const char *name;
    int fd;
    if (!f)
        return TQ_FAIL(TQ_E_ARG, "tq_atomic_file_commit: NULL handle");
    name = f->tmp ? f->tmp : f->target;
    if (f->fp && fflush(f->fp) != 0)
        st = TQ_FAIL(TQ_E_IO, "%s: write failed: %s", name, strerror(errno));
    fd = tq_atomic_file_fd(f);
    if (!st && fd >= 0 && fsync(fd) != 0 && (f->tmp || !sync_unsupported(errno)))
        st = TQ_FAIL(TQ_E_IO, "%s: fsync failed: %s", name, strerror(errno));
    if (f->fp) {
        if (fclose(f->fp) != 0 && !st)
            st = TQ_FAIL(TQ_E_IO, "%s: write failed: %s", name, strerror(errno));
        f->fp = NULL;
    } else if (f->fd >= 0) {
        if (close(f->fd) != 0 && !st)
            st = TQ_FAIL(TQ_E_IO, "%s: close failed: %s", name, strerror(errno));
    }
    f->fd = -1;
    if (!st && f->tmp) {
        if (rename(f->tmp, f->target) != 0) {
            st = TQ_FAIL(TQ_E_IO, "%s: cannot rename %s over it: %s (the old file is kept)",
                         f->target, f->tmp, strerror(errno));
        } else {
            char *dir = dir_of(f->target);
            const int dfd = dir ? open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
            if (dfd >= 0) {
                (void)fsync(dfd); /* make the rename durable */
                close(dfd);
            }
            tq_free(dir);
            tq_free(f->tmp);
            f->tmp = NULL;
        }
    }
    tq_atomic_file_abort(f); /* unlinks the temporary if the rename did not happen */
    return st;
}

void tq_atomic_file_abort(tq_atomic_file *f)
{
    if (!f)
        return;
    if (f->fp)
        fclose(f->fp);
    else if (f->fd >= 0)
        close(f->fd);
    if (f->tmp)
        unlink(f->tmp);
    tq_free(f->tmp);
    tq_free(f->target);
    tq_free(f->path);
    tq_free(f);
}
