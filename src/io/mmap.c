/* mmap.c -- read-only whole-file mappings and small path helpers for the model readers. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/io_internal.h"

static int64_t mtime_ns(const struct stat *sb)
{
    return (int64_t)sb->st_mtim.tv_sec * 1000000000 + (int64_t)sb->st_mtim.tv_nsec;
}

tq_status tq_map_file(const char *path, tq_map *m)
{
    struct stat sb;
    int fd;

    memset(m, 0, sizeof(*m));
    m->fd = -1;
    if (!path)
        return TQ_FAIL(TQ_E_ARG, "map: NULL path");
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return TQ_FAIL(TQ_E_IO, "%s: cannot open: %s", path, strerror(errno));
    if (fstat(fd, &sb) != 0) {
        close(fd);
        return TQ_FAIL(TQ_E_IO, "%s: cannot stat: %s", path, strerror(errno));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return TQ_FAIL(TQ_E_IO, "%s: not a regular file", path);
    }
    if (!(m->path = tq_strdup(path))) {
        close(fd);
        return TQ_FAIL(TQ_E_NOMEM, "%s: out of memory", path);
    }
    if (sb.st_size > 0) {
        void *p = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            close(fd);
            tq_free(m->path);
            m->path = NULL;
            return TQ_FAIL(TQ_E_IO, "%s: mmap failed: %s", path, strerror(errno));
        }
        m->data = p;
        m->size = (size_t)sb.st_size;
        m->mapped = 1;
    }
    m->fd = fd;
    m->mtime_ns = mtime_ns(&sb);
    return TQ_OK;
}

void tq_map_memory(tq_map *m, const void *data, size_t size)
{
    memset(m, 0, sizeof(*m));
    m->data = data;
    m->size = size;
    m->fd = -1;
}

void tq_unmap_file(tq_map *m)
{
    if (!m)
        return;
    if (m->mapped && m->data)
        munmap((void *)m->data, m->size);
    if (m->fd >= 0)
        close(m->fd);
    tq_free(m->path);
    memset(m, 0, sizeof(*m));
    m->fd = -1;
}

tq_status tq_map_read(const tq_map *m, size_t off, void *dst, size_t n)
{
    const char *path = m->path ? m->path : "(memory)";
    size_t done = 0;

    if (off > m->size || n > m->size - off)
        return TQ_FAIL(TQ_E_FORMAT, "%s: read of [%zu, +%zu) lies past the end (%zu bytes)", path,
                       off, n, m->size);
    if (m->fd < 0) {
        if (n)
            memcpy(dst, m->data + off, n);
        return TQ_OK;
    }
    while (done < n) {
        const size_t want = n - done < ((size_t)1 << 30) ? n - done : ((size_t)1 << 30);
        const ssize_t k = pread(m->fd, (uint8_t *)dst + done, want, (off_t)(off + done));
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return TQ_FAIL(TQ_E_IO, "%s: read failed at byte %zu: %s", path, off + done,
                           strerror(errno));
        if (k == 0)
            return TQ_FAIL(TQ_E_IO,
                           "%s: the file ends at byte %zu, but it had %zu bytes when it was "
                           "opened: it was truncated while being read (by another process?); "
                           "reload when the file is complete",
                           path, off + done, m->size);
        done += (size_t)k;
    }
    return TQ_OK;
}

tq_status tq_map_check(const tq_map *m)
{
    const char *path = m->path ? m->path : "(memory)";
    struct stat sb;
    if (m->fd < 0)
        return TQ_OK;
    if (fstat(m->fd, &sb) != 0)
        return TQ_FAIL(TQ_E_IO, "%s: cannot stat: %s", path, strerror(errno));
    if ((uint64_t)sb.st_size != (uint64_t)m->size || mtime_ns(&sb) != m->mtime_ns)
        return TQ_FAIL(TQ_E_IO,
                       "%s: the file changed while being read (%zu bytes when opened, %lld "
                       "now%s); reload when nothing is writing it",
                       path, m->size, (long long)sb.st_size,
                       (uint64_t)sb.st_size == (uint64_t)m->size ? ", modified" : "");
    return TQ_OK;
}

char *tq_path_join(const char *dir, const char *name)
{
    const size_t a = strlen(dir);
    const size_t b = strlen(name);
    char *p = tq_malloc(a + b + 2);
    if (!p)
        return NULL;
    memcpy(p, dir, a);
    size_t k = a;
    if (a && dir[a - 1] != '/')
        p[k++] = '/';
    memcpy(p + k, name, b + 1);
    return p;
}

int tq_is_dir(const char *path)
{
    struct stat sb;
    return path && stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

int tq_ends_with(const char *s, const char *suffix)
{
    const size_t a = strlen(s);
    const size_t b = strlen(suffix);
    return a >= b && memcmp(s + a - b, suffix, b) == 0;
}
