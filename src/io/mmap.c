/* mmap.c -- read-only whole-file mappings and small path helpers for the model readers. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/io_internal.h"

tq_status tq_map_file(const char *path, tq_map *m)
{
    struct stat sb;
    int fd;

    memset(m, 0, sizeof(*m));
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
    if (sb.st_size > 0) {
        void *p = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            close(fd);
            return TQ_FAIL(TQ_E_IO, "%s: mmap failed: %s", path, strerror(errno));
        }
        m->data = p;
        m->size = (size_t)sb.st_size;
        m->mapped = 1;
    }
    close(fd);
    return TQ_OK;
}

void tq_unmap_file(tq_map *m)
{
    if (m && m->mapped && m->data)
        munmap((void *)m->data, m->size);
    if (m)
        memset(m, 0, sizeof(*m));
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
